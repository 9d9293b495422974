"""Where things live and which judge to use: one typed object, read from the environment by `load()`.

Every location defaults to a folder in the working directory (`./data/tenants`, `./warehouse`,
`./candidates`, `./.dagster_home`), so an installed package never writes inside site-packages;
each can be moved with its environment variable. An empty variable counts as unset. A bad value is
a `SettingsError` naming the variable, in one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from rag_eval_pipeline.core.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_JUDGE_MODE,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RATE_LIMIT_BUDGET_S,
    DEFAULT_RESPONSE_FORMAT,
    DEFAULT_TIMEOUT_S,
    NO_API_KEY,
    JudgeKind,
    JudgeMode,
    ResponseFormat,
    Tier,
)
from rag_eval_pipeline.core.names import PartitionNameError, validate_name

# The repo's instance config (run-queue limits), copied into a new Dagster home. It exists only in a
# source checkout; an installed package has none and Dagster's defaults apply.
INSTANCE_CONFIG_TEMPLATE = Path(__file__).resolve().parents[1] / "dagster.yaml"

# Each location: its variable and its default folder under the working directory.
LOCATIONS = {
    "documents_root": ("RAG_EVAL_DOCUMENTS_ROOT", "data/tenants"),  # one folder per tenant
    "warehouse_root": ("RAG_EVAL_WAREHOUSE", "warehouse"),  # Parquet tables, caches, baselines
    "candidates_root": ("RAG_EVAL_CANDIDATES_ROOT", "candidates"),  # candidate manifests, one per commit
    "dagster_home": ("DAGSTER_HOME", ".dagster_home"),  # the Dagster instance
}
JUDGE_VARIABLES = {
    "kind": "RAG_EVAL_JUDGE",
    "base_url": "RAG_EVAL_JUDGE_BASE_URL",
    "model": "RAG_EVAL_JUDGE_MODEL",
    "api_key": "RAG_EVAL_JUDGE_API_KEY",
    "mode": "RAG_EVAL_JUDGE_MODE",
    "response_format": "RAG_EVAL_JUDGE_RESPONSE_FORMAT",
    "concurrency": "RAG_EVAL_JUDGE_CONCURRENCY",
    "timeout_s": "RAG_EVAL_JUDGE_TIMEOUT_S",
    "max_retries": "RAG_EVAL_JUDGE_MAX_RETRIES",
    "rate_limit_budget_s": "RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S",
    "priority": "RAG_EVAL_JUDGE_PRIORITY",
    "priority_by_tier": "RAG_EVAL_JUDGE_PRIORITY_BY_TIER",
    "cache": "RAG_EVAL_JUDGE_CACHE",
    "price_table": "RAG_EVAL_PRICE_TABLE",  # what the judge's tokens cost, per model (reporting/cost.py)
}
# The git branch the candidate sensor follows; none is followed while RAG_EVAL_CANDIDATE_REPO is unset.
BRANCH_VARIABLES = {
    "repo": "RAG_EVAL_CANDIDATE_REPO",
    "branch": "RAG_EVAL_CANDIDATE_BRANCH",
    "tenant": "RAG_EVAL_CANDIDATE_TENANT",
    "entry": "RAG_EVAL_CANDIDATE_ENTRY",
}
# Production mode: results in Postgres, large tables in an object store, caches in Redis. Each is off
# while its variable is unset; the database URL is what turns production mode on.
PRODUCTION_VARIABLES = {
    "database_url": "RAG_EVAL_DATABASE_URL",  # the pipeline's role, rag_eval_app
    "database_admin_url": "RAG_EVAL_DATABASE_ADMIN_URL",  # only `rag-eval db upgrade` uses it
    "object_store_url": "RAG_EVAL_OBJECT_STORE_URL",  # s3://bucket/prefix
    "object_store_endpoint": "RAG_EVAL_OBJECT_STORE_ENDPOINT",  # an S3-compatible server's URL
    "cache_url": "RAG_EVAL_CACHE_URL",  # redis://host:port/db, shared by every worker
    "cache_shared_across_tenants": "RAG_EVAL_CACHE_SHARED_ACROSS_TENANTS",  # off: one cache namespace per tenant
    "run_timeout_s": "RAG_EVAL_RUN_TIMEOUT_S",  # how long `rag-eval` waits for a run on a worker
    "database_lock_timeout_s": "RAG_EVAL_DATABASE_LOCK_TIMEOUT_S",  # a session's longest wait for a lock
    "database_statement_timeout_s": "RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S",  # one statement's longest run
    "retention_days": "RAG_EVAL_RETENTION_DAYS",  # what `rag-eval prune` keeps, in both modes
    "retention_days_by_tenant": "RAG_EVAL_RETENTION_DAYS_BY_TENANT",  # acme=30,globex=365
}
# The gate service (`rag-eval serve`) and its tokens, and the CLI as the service's client.
SERVICE_VARIABLES = {
    "token_key_file": "RAG_EVAL_TOKEN_KEY_FILE",  # the local HS256 signing key (one machine)
    "jwks_url": "RAG_EVAL_AUTH_JWKS_URL",  # an identity provider's keys (RS256/ES256), instead of the local key
    "issuer": "RAG_EVAL_AUTH_ISSUER",
    "audience": "RAG_EVAL_AUTH_AUDIENCE",
    "tenant_claim": "RAG_EVAL_AUTH_TENANT_CLAIM",
    "max_gates": "RAG_EVAL_SERVICE_MAX_GATES",
    "warm_children": "RAG_EVAL_SERVICE_WARM_CHILDREN",
    "max_gates_per_tenant": "RAG_EVAL_SERVICE_MAX_GATES_PER_TENANT",
    "server_url": "RAG_EVAL_SERVER",  # set both of these in a tenant's CI: the CLI then talks to the service
    "token": "RAG_EVAL_TOKEN",
}
# Judge nodes: vLLM servers the run starts on loopback (resources/judge_nodes.py); none while the model is unset.
VLLM_VARIABLES = {
    "model": "RAG_EVAL_VLLM_MODEL",
    "executable": "RAG_EVAL_VLLM_EXECUTABLE",
    "served_model_name": "RAG_EVAL_VLLM_SERVED_MODEL_NAME",
    "replicas": "RAG_EVAL_VLLM_REPLICAS",
    "port": "RAG_EVAL_VLLM_PORT",
    "quantization": "RAG_EVAL_VLLM_QUANTIZATION",
    "kv_cache_dtype": "RAG_EVAL_VLLM_KV_CACHE_DTYPE",
    "gpu_memory_utilization": "RAG_EVAL_VLLM_GPU_MEMORY_UTILIZATION",
    "max_model_len": "RAG_EVAL_VLLM_MAX_MODEL_LEN",
    "tensor_parallel_size": "RAG_EVAL_VLLM_TENSOR_PARALLEL_SIZE",
    "max_num_seqs": "RAG_EVAL_VLLM_MAX_NUM_SEQS",
    "structured_outputs_backend": "RAG_EVAL_VLLM_STRUCTURED_OUTPUTS_BACKEND",
    "priority_scheduling": "RAG_EVAL_VLLM_PRIORITY_SCHEDULING",
    "gpus": "RAG_EVAL_VLLM_GPUS",
    "extra_args": "RAG_EVAL_VLLM_EXTRA_ARGS",
    "lifetime": "RAG_EVAL_VLLM_LIFETIME",
    "startup_timeout_s": "RAG_EVAL_VLLM_STARTUP_TIMEOUT_S",
    "stop_grace_s": "RAG_EVAL_VLLM_STOP_GRACE_S",
    "log_dir": "RAG_EVAL_VLLM_LOG_DIR",
}
# How long a run elsewhere may go without a heartbeat before it is called dead (automation/liveness.py).
RUN_STALE_AFTER_VARIABLE = "RAG_EVAL_RUN_STALE_AFTER_S"
# Packages a candidate manifest may name code in (comma-separated); none by default.
CANDIDATE_MODULES_VARIABLE = "RAG_EVAL_CANDIDATE_MODULES"
METRICS_VARIABLE = "RAG_EVAL_METRICS"
PHOENIX_URL_VARIABLE = "RAG_EVAL_PHOENIX_URL"
EMBEDDING_PRECISION_VARIABLE = "RAG_EVAL_EMBEDDING_PRECISION"
JUDGE_CACHE_FILE = "judge_cache.sqlite"  # in the warehouse unless RAG_EVAL_JUDGE_CACHE moves it


class SettingsError(ValueError):
    """An environment variable holds a value that cannot work; the message names it."""


class JudgeSettings(BaseModel):
    """The judge (and LLM question generator) options, as RAG_EVAL_JUDGE_* set them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JudgeKind = Field(default="offline", description="`offline` (embedded, no server) or `llm`")
    base_url: str = Field(
        default="",
        description="the OpenAI-compatible server, e.g. `http://vllm.internal:8000/v1`; several replicas of one "
        "model comma-separated, which take the calls in turn",
    )
    model: str = Field(
        default="", description="the model the server serves, e.g. `meta-llama/Meta-Llama-3-8B-Instruct`"
    )
    api_key: str = Field(default=NO_API_KEY, description="only if the server wants one")
    mode: JudgeMode = Field(
        default=DEFAULT_JUDGE_MODE, description="`decomposed` (2 calls per item for the core metrics) or `fused` (1)"
    )
    response_format: ResponseFormat = Field(
        default=DEFAULT_RESPONSE_FORMAT,
        description="`json_schema` (vLLM, OpenAI) or `json_object_schema` (the llama.cpp server)",
    )
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, description="judge calls in flight at once")
    timeout_s: float = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        allow_inf_nan=False,
        description="seconds one attempt of a call may take, time queued on the server included (`--timeout-s`)",
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        ge=0,
        description="retries of a call on HTTP 408/409/5xx (503 aside), connection errors, timeouts and HTTP 200 "
        "replies that are no chat completion (`--max-retries`)",
    )
    rate_limit_budget_s: float = Field(
        default=DEFAULT_RATE_LIMIT_BUDGET_S,
        ge=0,
        allow_inf_nan=False,
        description="seconds one call may spend retrying HTTP 429 and 503 (back-pressure), waiting what "
        "Retry-After asks, before the run stops (`--rate-limit-budget-s`)",
    )
    priority: int | None = Field(
        default=None,
        description="vLLM's request priority, lower served first (needs `vllm serve --scheduling-policy "
        "priority`); unset: not sent (`--priority`)",
    )
    priority_by_tier: dict[Tier, int] = Field(
        default_factory=dict,
        description="vLLM's request priority by the run's tenant tier, e.g. `small=0,large=10`; a tier not named "
        "gets `priority`",
    )
    cache: str = Field(
        default="",
        description="the cache of LLM calls: a SQLite file, or the production Redis URL when `RAG_EVAL_CACHE_URL` "
        "is set; '' keeps it in memory",
    )

    price_table: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="what the LLM judge's tokens cost, per model: `model=prompt_per_1k:completion_per_1k,...` "
        '(e.g. `gpt-4o-mini=0.00015:0.0006`) or the path of a `.json` file `{"model": {"prompt_per_1k": ..., '
        '"completion_per_1k": ...}}`; reports and `rag-eval history` then show each run\'s cost (unset: tokens only)',
    )

    @field_validator("priority_by_tier", mode="before")
    @classmethod
    def _read_tier_priorities(cls, value: object) -> object:
        return tier_priorities(value) if isinstance(value, str) else value

    @field_validator("price_table", mode="before")
    @classmethod
    def _read_price_table(cls, value: object) -> object:
        return price_table(value) if isinstance(value, str) else value


class FollowedBranch(BaseModel):
    """The branch whose new commits the candidate sensor audits, as RAG_EVAL_CANDIDATE_* set it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(description="the git repository the candidate sensor follows; none is followed while unset")
    branch: str = Field(default="main", description="the followed branch")
    tenant: str = Field(
        default="", description="the tenant whose golden set the followed branch's commits are audited on"
    )
    entry: str = Field(
        default="reference", description="the candidate entry point (`module:function`) audited at each new commit"
    )


class ProductionSettings(BaseModel):
    """Where a production deployment keeps what every worker must share (RAG_EVAL_DATABASE_URL etc.)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = Field(
        default="", description="the results database as the pipeline's role, `rag_eval_app`; turns production mode on"
    )
    database_admin_url: str = Field(
        default="", description="a superuser's URL of the results database; only `rag-eval db upgrade` uses it"
    )
    object_store_url: str = Field(default="", description="`s3://bucket/prefix` for the large tables")
    object_store_endpoint: str = Field(default="", description="the S3-compatible server's URL")
    cache_url: str = Field(
        default="", description="`redis://host:port/db`: the judge-call and embedding caches every worker shares"
    )
    # Read where a run executes, never from a run's config: only the operator may turn sharing on.
    cache_shared_across_tenants: bool = Field(
        default=False,
        description="`true`: every tenant's runs read and write one namespace of the judge-call and embedding "
        "caches (Redis or SQLite), so hit counts tell a tenant which texts another sent; `false`: one per tenant",
    )
    run_timeout_s: float = Field(
        default=7200.0,
        gt=0,
        allow_inf_nan=False,
        description="how long `rag-eval run`/`gate` wait for a run on a worker before asking to cancel it",
    )
    # Sent as each results-database session's lock_timeout and statement_timeout (milliseconds there),
    # so a session stuck behind another's lock, or in a runaway statement, fails instead of stalling.
    database_lock_timeout_s: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description="the longest a results-database session waits for a lock (a table's, a row's, a tenant's "
        "promotion or a version's lock) before it fails",
    )
    database_statement_timeout_s: float = Field(
        default=120.0,
        gt=0,
        allow_inf_nan=False,
        description="the longest one statement on the results database may run before it is canceled",
    )
    # Read by `rag-eval prune` in the embedded mode too: retention is a tenant's policy, not a store's.
    retention_days: int = Field(
        default=90,
        ge=1,
        description="days a tenant's audits, submitted outputs and Dagster runs are kept; `rag-eval prune` removes "
        "older ones, never a baseline's audits nor a golden set",
    )
    retention_days_by_tenant: dict[str, PositiveInt] = Field(
        default_factory=dict, description="per-tenant overrides of the retention in days, e.g. `acme=30,globex=365`"
    )

    @field_validator("retention_days_by_tenant", mode="before")
    @classmethod
    def _read_tenant_days(cls, value: object) -> object:
        return tenant_days(value) if isinstance(value, str) else value

    def retention_for(self, tenant: str) -> int:
        """The days a tenant's audits and runs are kept: its override, else the default."""
        return self.retention_days_by_tenant.get(tenant, self.retention_days)

    @model_validator(mode="after")
    def _object_store_needs_the_database(self) -> ProductionSettings:
        if self.object_store_url and not self.database_url:
            raise ValueError(
                "RAG_EVAL_OBJECT_STORE_URL is set but RAG_EVAL_DATABASE_URL is not: production mode "
                "keeps the results in Postgres, so set both (or neither, for the embedded mode)"
            )
        if self.object_store_url and not self.object_store_endpoint:
            raise ValueError(
                "RAG_EVAL_OBJECT_STORE_URL is set but RAG_EVAL_OBJECT_STORE_ENDPOINT is not: "
                "name the S3-compatible server, e.g. http://127.0.0.1:8333"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.database_url)


class ServiceSettings(BaseModel):
    """The gate service's token verification, and where the CLI finds the service (RAG_EVAL_SERVER etc.)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token_key_file: Path | None = Field(
        default=None, description="a file holding the HS256 key the service signs and verifies local tokens with"
    )
    jwks_url: str = Field(
        default="", description="an identity provider's JWKS URL: tokens are then RS256/ES256 and checked against it"
    )
    issuer: str = Field(default="rag-eval", description="the `iss` every token must carry")
    audience: str = Field(default="rag-eval-gate", description="the `aud` every token must carry")
    tenant_claim: str = Field(default="tenant", description="the claim that names the token's tenant")
    max_gates: int = Field(default=8, ge=1, description="gates the service runs at once; more wait their turn")
    max_gates_per_tenant: int = Field(
        default=4, ge=1, description="gates one tenant may have queued or running in the service; more get HTTP 429"
    )
    warm_children: int = Field(
        default=2,
        ge=0,
        description="`rag-eval` processes the service starts ahead of their command, imports done (each runs "
        "one command, then exits); 0: each command starts cold",
    )
    server_url: str = Field(default="", description="the gate service's URL, for a tenant's CI (with the token)")
    token: str = Field(default="", description="the tenant's token, for a tenant's CI (with the server URL)")

    @property
    def remote(self) -> bool:
        """Whether the CLI talks to a gate service instead of opening the stores itself."""
        return bool(self.server_url and self.token)


class VLLMSettings(BaseModel):
    """Judge nodes: vLLM servers on loopback that a run starts and stops, as RAG_EVAL_VLLM_* set them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        default="",
        description="a local model folder (weights are never downloaded); set, the judge is the LLM on these nodes",
    )
    executable: str = Field(
        default="vllm", description="the `vllm` command of vLLM's own virtual environment (its torch is not ours)"
    )
    served_model_name: str = Field(default="", description="the model name requests use; unset: the folder's name")
    replicas: int = Field(default=1, ge=1, description="nodes started, one per port from the first port up")
    port: int = Field(default=8000, ge=1, le=65535, description="the first node's port on 127.0.0.1")
    quantization: Literal["fp8", "awq", "none"] = Field(
        default="fp8",
        description="`fp8`: FP8 weights (a 16-bit checkpoint is quantized at load, an FP8 one served as it is); "
        "`awq`: an AWQ checkpoint; `none`: the checkpoint as it is",
    )
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        default="auto", description="the KV cache's dtype; `fp8` halves its memory"
    )
    gpu_memory_utilization: float = Field(
        default=0.9, gt=0, le=1, description="the share of each GPU's memory a node may take (weights and KV cache)"
    )
    max_model_len: int = Field(
        default=8192, ge=1, description="the longest prompt plus reply a node accepts, in tokens"
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs each node spreads its model over")
    max_num_seqs: int = Field(default=256, ge=1, description="requests a node batches at once")
    structured_outputs_backend: Literal["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"] = Field(
        default="auto", description="the grammar engine behind `response_format` `json_schema`"
    )
    priority_scheduling: bool = Field(
        default=True,
        description="`--scheduling-policy priority`, so a request's `priority` orders the queue (vLLM refuses a "
        "priority under its default policy)",
    )
    gpus: tuple[str, ...] = Field(
        default=(),
        description="GPU ids, comma-separated; node i gets the i-th slice of `tensor_parallel_size` of them; "
        "unset: every node sees the environment's GPUs",
    )
    extra_args: tuple[str, ...] = Field(default=(), description="more `vllm serve` arguments, split as a shell would")
    lifetime: Literal["run", "process"] = Field(
        default="run",
        description="`run`: the nodes start with each run and stop at its end; `process`: they start with the "
        "first run of a process and stop when it exits",
    )
    startup_timeout_s: float = Field(
        default=900.0, gt=0, allow_inf_nan=False, description="how long the nodes may take to answer `/health`"
    )
    stop_grace_s: float = Field(
        default=30.0, gt=0, allow_inf_nan=False, description="seconds between SIGTERM and SIGKILL when a node stops"
    )
    log_dir: str = Field(default="", description="the nodes' log files; unset: a folder in the system's temp dir")

    @field_validator("gpus", mode="before")
    @classmethod
    def _read_gpus(cls, value: object) -> object:
        return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else value

    @field_validator("extra_args", mode="before")
    @classmethod
    def _read_extra_args(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return tuple(shlex.split(value))
        except ValueError as error:
            raise ValueError(f"{VLLM_VARIABLES['extra_args']} cannot be split as a shell would: {error}") from None

    @model_validator(mode="after")
    def _ports_and_gpus_fit(self) -> VLLMSettings:
        last_port = self.port + self.replicas - 1
        if last_port > 65535:
            raise ValueError(
                f"{VLLM_VARIABLES['port']} + {VLLM_VARIABLES['replicas']} - 1 must be a port (at most 65535), "
                f"got {last_port}"
            )
        needed = self.replicas * self.tensor_parallel_size
        if self.gpus and len(self.gpus) < needed:
            raise ValueError(
                f"{VLLM_VARIABLES['gpus']} names {len(self.gpus)} GPU(s) but {VLLM_VARIABLES['replicas']} x "
                f"{VLLM_VARIABLES['tensor_parallel_size']} need {needed}"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.model)


class Settings(BaseModel):
    """Every setting of the pipeline; `load()` reads it from the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    documents_root: Path = Field(description="one folder of documents per tenant")
    warehouse_root: Path = Field(
        description="Parquet tables `<tenant>/<version>/<asset>.parquet`, the embedding and judge caches, baselines"
    )
    candidates_root: Path = Field(description="candidate manifests, one JSON file per commit (see Automation)")
    dagster_home: Path = Field(
        description="the Dagster instance; `rag-eval` and `make` copy the repo's `dagster.yaml` there"
    )
    judge: JudgeSettings = Field(description="the judge of the assets, and the LLM question generator's server")
    followed_branch: FollowedBranch | None = Field(
        default=None, description="the git branch the candidate sensor follows, if any"
    )
    candidate_modules: tuple[str, ...] = Field(
        default=(),
        description="packages a candidate manifest, or a metric named `package.module:function`, may name code in "
        "(comma-separated); none by default",
    )
    phoenix_url: str = Field(
        default="",
        description="Phoenix's base URL, e.g. `http://127.0.0.1:6006`: a report's worst items link to their "
        "traces there. An operator's tool: set it only where report readers may reach Phoenix (see Tracing)",
    )
    metrics: tuple[str, ...] = Field(
        default=(),
        description="the metrics a run scores, comma-separated: built-in names, `package.module:function` or an "
        "installed entry point's name (see Metrics); unset: every built-in metric",
    )
    embedding_precision: Literal["float32", "int8"] = Field(
        default="float32",
        description="MiniLM's weights as computed (`float32`: sentence-transformers' vectors) or quantized to "
        "8 bits (`int8`: faster, vectors within cosine 0.98, see Figures); a change re-embeds every text once, "
        "and int8 scores name their judge `...+embeddings-int8`, which the gate will not compare with a float32 "
        "baseline: set a new baseline after a change",
    )
    production: ProductionSettings = Field(
        default=ProductionSettings(), description="production mode's shared stores (see Production)"
    )
    service: ServiceSettings = Field(
        default=ServiceSettings(), description="the gate service and its tokens (see Production)"
    )
    vllm: VLLMSettings = Field(
        default=VLLMSettings(), description="judge nodes the runs start on loopback (see Production)"
    )
    # A run's process beats every fifth of this; a run on another machine silent for longer is dead.
    run_stale_after_s: float = Field(
        default=300.0,
        ge=1,
        allow_inf_nan=False,
        description="a run on another machine whose heartbeat is older is dead; set it alike everywhere",
    )


def load(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """The settings from environ (default: the process environment), locations absolute under cwd."""
    environ = os.environ if environ is None else environ
    base = Path.cwd() if cwd is None else Path(cwd)
    locations = {
        name: Path(value).expanduser().resolve() if (value := _value(environ, variable)) else base / folder
        for name, (variable, folder) in LOCATIONS.items()
    }
    judge = {name: value for name, variable in JUDGE_VARIABLES.items() if (value := _value(environ, variable))}
    production = {
        name: value for name, variable in PRODUCTION_VARIABLES.items() if (value := _value(environ, variable))
    }
    judge.setdefault("cache", production.get("cache_url") or str(locations["warehouse_root"] / JUDGE_CACHE_FILE))
    branch = {name: value for name, variable in BRANCH_VARIABLES.items() if (value := _value(environ, variable))}
    modules = tuple(m.strip() for m in _value(environ, CANDIDATE_MODULES_VARIABLE).split(",") if m.strip())
    metrics = tuple(dict.fromkeys(m.strip() for m in _value(environ, METRICS_VARIABLE).split(",") if m.strip()))
    phoenix = {"phoenix_url": value} if (value := _value(environ, PHOENIX_URL_VARIABLE)) else {}
    service = {name: value for name, variable in SERVICE_VARIABLES.items() if (value := _value(environ, variable))}
    vllm = {name: value for name, variable in VLLM_VARIABLES.items() if (value := _value(environ, variable))}
    runs = {"run_stale_after_s": value} if (value := _value(environ, RUN_STALE_AFTER_VARIABLE)) else {}
    precision = {"embedding_precision": value} if (value := _value(environ, EMBEDDING_PRECISION_VARIABLE)) else {}
    try:
        return Settings.model_validate(
            {
                **locations,
                "judge": judge,
                "candidate_modules": modules,
                "metrics": metrics,
                **phoenix,
                "followed_branch": branch if "repo" in branch else None,
                "production": production,
                "service": service,
                "vllm": vllm,
                **runs,
                **precision,
            }
        )
    except ValidationError as error:
        raise SettingsError("; ".join(_problem(problem) for problem in error.errors())) from None


def tenant_days(text: str) -> dict[str, int]:
    """`acme=30,globex=365` as {tenant: days}; ValueError naming RAG_EVAL_RETENTION_DAYS_BY_TENANT otherwise."""
    days = {}
    for item in (part.strip() for part in text.split(",")):
        tenant, _, value = (side.strip() for side in item.partition("="))
        if not (_is_tenant(tenant) and value.isdigit() and int(value) >= 1):
            raise ValueError(
                f"{PRODUCTION_VARIABLES['retention_days_by_tenant']} must be tenant=days pairs with days at least 1 "
                f"(e.g. acme=30,globex=365), got {item!r}"
            )
        days[tenant] = int(value)
    return days


def tier_priorities(text: str) -> dict[str, int]:
    """`small=0,large=10` as {tier: priority}; ValueError naming RAG_EVAL_JUDGE_PRIORITY_BY_TIER otherwise."""
    priorities = {}
    for item in (part.strip() for part in text.split(",")):
        tier, _, value = (side.strip() for side in item.partition("="))
        if tier not in get_args(Tier) or not re.fullmatch(r"-?[0-9]+", value):
            raise ValueError(
                f"{JUDGE_VARIABLES['priority_by_tier']} must be tier=priority pairs, tiers "
                f"{' or '.join(get_args(Tier))} and integer priorities (e.g. small=0,large=10), got {item!r}"
            )
        priorities[tier] = int(value)
    return priorities


MAX_PRICE_PER_1K = 1_000_000.0


def price_table(text: str) -> dict[str, tuple[float, float]]:
    """RAG_EVAL_PRICE_TABLE as {model: (price per 1,000 prompt tokens, per 1,000 completion tokens)}.

    Inline, `model=prompt:completion` pairs comma-separated (the last `=` ends the model's name, so
    `llama3:8b=0.1:0.2` works), or the path of a `.json` file mapping each model to its `prompt_per_1k` and
    `completion_per_1k`. Prices are numbers from 0 to 1,000,000, in one currency of your choice. ValueError
    naming the variable, in one line, otherwise.
    """
    variable = JUDGE_VARIABLES["price_table"]
    text = text.strip()
    if not text:
        return {}
    if text.lower().endswith(".json"):
        return _price_file(Path(text).expanduser(), variable)
    prices = {}
    for item in (part.strip() for part in text.split(",")):
        model, _, pair = (side.strip() for side in item.rpartition("="))
        prompt, _, completion = pair.partition(":")
        parsed = [_price(prompt), _price(completion)]
        if not model or None in parsed:
            raise ValueError(
                f"{variable} must be model=prompt_per_1k:completion_per_1k pairs, comma-separated, prices numbers "
                f"from 0 to {MAX_PRICE_PER_1K:,.0f} (e.g. gpt-4o-mini=0.00015:0.0006), or a .json file; got {item!r}"
            )
        prices[model] = (float(parsed[0]), float(parsed[1]))  # type: ignore[arg-type]
    return prices


def _price(text) -> float | None:
    """A price: a number from 0 to MAX_PRICE_PER_1K (a JSON number or its text), else None. Bounded, so a
    run's cost stays a finite number however many tokens it took."""
    if isinstance(text, bool):
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and 0 <= value <= MAX_PRICE_PER_1K else None


def _price_file(path: Path, variable: str) -> dict[str, tuple[float, float]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error).splitlines()[0]
        raise ValueError(f"{variable} names {path}, which is no readable JSON file: {reason}") from None
    prices = {}
    for model, entry in document.items() if isinstance(document, dict) else [("", None)]:
        pair = (
            [_price(entry.get(key)) for key in ("prompt_per_1k", "completion_per_1k")]
            if isinstance(entry, dict)
            else [None]
        )
        if not model or None in pair:
            raise ValueError(
                f'{variable} file {path} must map each model to {{"prompt_per_1k": number, "completion_per_1k": '
                f"number}}, prices from 0 to {MAX_PRICE_PER_1K:,.0f}; got {model or 'no object'}: {json.dumps(entry)[:80]}"
            )
        prices[str(model)] = (float(pair[0]), float(pair[1]))  # type: ignore[arg-type]
    return prices


def _is_tenant(name: str) -> bool:
    try:
        validate_name("tenant", name)
        return True
    except PartitionNameError:
        return False


def _value(environ: Mapping[str, str], variable: str) -> str:
    return environ.get(variable, "").strip()


def _problem(problem: ErrorDetails) -> str:
    """One pydantic error as '<VARIABLE> must be ..., got <value>' (a rule across variables: its message)."""
    if problem["type"] == "value_error":
        return str(problem.get("ctx", {}).get("error"))  # names its variables; the values may hold passwords
    field = str(problem["loc"][-1])
    variable = (
        (VLLM_VARIABLES.get(field) if problem["loc"][0] == "vllm" else None)  # its `model` is not the judge's
        or JUDGE_VARIABLES.get(field)
        or PRODUCTION_VARIABLES.get(field)
        or SERVICE_VARIABLES.get(field)
        or {"run_stale_after_s": RUN_STALE_AFTER_VARIABLE, "embedding_precision": EMBEDDING_PRECISION_VARIABLE}.get(
            field
        )
        or LOCATIONS.get(field, (field,))[0]
    )
    context = problem.get("ctx") or {}
    wanted = {
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "literal_error": f"must be one of {context.get('expected', '')}",
        "greater_than": f"must be greater than {context.get('gt')}",
        "greater_than_equal": f"must be at least {context.get('ge')}",
        "less_than_equal": f"must be at most {context.get('le')}",
        "bool_parsing": "must be true or false (also 1/0, yes/no, on/off)",
    }.get(problem["type"], problem["msg"])
    return f"{variable} {wanted}, got {problem.get('input')!r}"
