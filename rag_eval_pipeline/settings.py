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

    kind: JudgeKind = "offline"
    base_url: str = ""
    model: str = ""
    api_key: str = NO_API_KEY
    mode: JudgeMode = DEFAULT_JUDGE_MODE
    response_format: ResponseFormat = DEFAULT_RESPONSE_FORMAT
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    cache: str = ""  # the on-disk cache of LLM calls; '' keeps it in memory


class FollowedBranch(BaseModel):
    """The branch whose new commits the candidate sensor audits, as RAG_EVAL_CANDIDATE_* set it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str
    branch: str = "main"
    tenant: str = ""
    entry: str = "reference"


class ProductionSettings(BaseModel):
    """Where a production deployment keeps what every worker must share (RAG_EVAL_DATABASE_URL etc.)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = ""
    database_admin_url: str = ""
    object_store_url: str = ""
    object_store_endpoint: str = ""
    cache_url: str = ""
    run_timeout_s: float = Field(default=7200.0, gt=0, allow_inf_nan=False)

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
    model_config = ConfigDict(frozen=True, extra="forbid")

    documents_root: Path
    warehouse_root: Path
    candidates_root: Path
    dagster_home: Path
    judge: JudgeSettings
    followed_branch: FollowedBranch | None = None
    candidate_modules: tuple[str, ...] = ()
    production: ProductionSettings = ProductionSettings()
    # A run's process beats every fifth of this; a run on another machine silent for longer is dead.
    run_stale_after_s: float = Field(default=300.0, ge=1, allow_inf_nan=False)


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
        return Settings(
            **locations,
            judge=JudgeSettings(**judge),
            candidate_modules=modules,
            followed_branch=FollowedBranch(**branch) if "repo" in branch else None,
            production=ProductionSettings(**production),
            **runs,
        )
    except ValidationError as error:
        raise SettingsError("; ".join(_problem(problem) for problem in error.errors())) from None


def _value(environ: Mapping[str, str], variable: str) -> str:
    return environ.get(variable, "").strip()


def _problem(problem: dict) -> str:
    """One pydantic error as '<VARIABLE> must be ..., got <value>' (a rule across variables: its message)."""
    if problem["type"] == "value_error":
        return str(problem["ctx"]["error"])  # names its variables; the values may hold passwords
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
