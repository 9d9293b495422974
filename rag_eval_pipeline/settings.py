"""Where things live by default. Every location can be moved with an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _path(variable: str, default: Path, override: Path | str | None = None) -> Path:
    """override (a caller's own path) if given, else the environment variable, else the default."""
    if override:
        return Path(override)
    value = os.environ.get(variable)
    return Path(value).expanduser().resolve() if value else default


def documents_root(override: Path | str | None = None) -> Path:
    """One folder per tenant, holding that tenant's documents."""
    return _path("RAG_EVAL_DOCUMENTS_ROOT", PROJECT_ROOT / "data" / "tenants", override)


def warehouse_root(override: Path | str | None = None) -> Path:
    """Parquet tables per tenant and dataset version (git-ignored)."""
    return _path("RAG_EVAL_WAREHOUSE", PROJECT_ROOT / "warehouse", override)


def candidates_root(override: Path | str | None = None) -> Path:
    """Candidate manifests, one JSON file per commit (git-ignored)."""
    return _path("RAG_EVAL_CANDIDATES_ROOT", PROJECT_ROOT / "candidates", override)


def dagster_home() -> Path:
    return _path("DAGSTER_HOME", PROJECT_ROOT / ".dagster_home")
