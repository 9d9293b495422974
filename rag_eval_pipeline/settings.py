"""Where things live and which judge to use: one typed object, read from the environment by `load()`.

Every location defaults to a folder in the working directory (`./data/tenants`, `./warehouse`,
`./candidates`, `./.dagster_home`), so an installed package never writes inside site-packages;
each can be moved with its environment variable. An empty variable counts as unset. A bad value is
a `SettingsError` naming the variable, in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from rag_eval_pipeline.core.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_JUDGE_MODE,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RESPONSE_FORMAT,
    DEFAULT_TIMEOUT_S,
    NO_API_KEY,
    JudgeKind,
    JudgeMode,
    ResponseFormat,
)

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
    "cache": "RAG_EVAL_JUDGE_CACHE",
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
    "run_timeout_s": "RAG_EVAL_RUN_TIMEOUT_S",  # how long `rag-eval` waits for a run on a worker
}
# How long a run elsewhere may go without a heartbeat before it is called dead (automation/liveness.py).
RUN_STALE_AFTER_VARIABLE = "RAG_EVAL_RUN_STALE_AFTER_S"
# Packages a candidate manifest may name code in (comma-separated); none by default.
CANDIDATE_MODULES_VARIABLE = "RAG_EVAL_CANDIDATE_MODULES"
JUDGE_CACHE_FILE = "judge_cache.sqlite"  # in the warehouse unless RAG_EVAL_JUDGE_CACHE moves it


class SettingsError(ValueError):
    """An environment variable holds a value that cannot work; the message names it."""


class JudgeSettings(BaseModel):
    """The judge (and LLM question generator) options, as RAG_EVAL_JUDGE_* set them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JudgeKind = Field(default="offline", description="`offline` (embedded, no server) or `llm`")
    base_url: str = Field(default="", description="the OpenAI-compatible server, e.g. `http://vllm.internal:8000/v1`")
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
        description="retries of a call on HTTP 408/409/429/5xx, connection errors, timeouts and HTTP 200 replies "
        "that are no chat completion (`--max-retries`)",
    )
    cache: str = Field(
        default="",
        description="the cache of LLM calls: a SQLite file, or the production Redis URL when `RAG_EVAL_CACHE_URL` "
        "is set; '' keeps it in memory",
    )


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
    run_timeout_s: float = Field(
        default=7200.0,
        gt=0,
        allow_inf_nan=False,
        description="how long `rag-eval run`/`gate` wait for a run on a worker before asking to cancel it",
    )

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
        default=(), description="packages a candidate manifest may name code in (comma-separated); none by default"
    )
    production: ProductionSettings = Field(
        default=ProductionSettings(), description="production mode's shared stores (see Production)"
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
    runs = {"run_stale_after_s": value} if (value := _value(environ, RUN_STALE_AFTER_VARIABLE)) else {}
    try:
        return Settings.model_validate(
            {
                **locations,
                "judge": judge,
                "candidate_modules": modules,
                "followed_branch": branch if "repo" in branch else None,
                "production": production,
                **runs,
            }
        )
    except ValidationError as error:
        raise SettingsError("; ".join(_problem(problem) for problem in error.errors())) from None


def _value(environ: Mapping[str, str], variable: str) -> str:
    return environ.get(variable, "").strip()


def _problem(problem: ErrorDetails) -> str:
    """One pydantic error as '<VARIABLE> must be ..., got <value>' (a rule across variables: its message)."""
    if problem["type"] == "value_error":
        return str(problem.get("ctx", {}).get("error"))  # names its variables; the values may hold passwords
    field = str(problem["loc"][-1])
    variable = (
        JUDGE_VARIABLES.get(field)
        or PRODUCTION_VARIABLES.get(field)
        or {"run_stale_after_s": RUN_STALE_AFTER_VARIABLE}.get(field)
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
    }.get(problem["type"], problem["msg"])
    return f"{variable} {wanted}, got {problem.get('input')!r}"
