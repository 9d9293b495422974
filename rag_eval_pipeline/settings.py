"""Where things live by default. Every location can be moved with an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _path(variable: str, default: Path) -> Path:
    value = os.environ.get(variable)
    return Path(value).expanduser().resolve() if value else default


def documents_root() -> Path:
    """One folder per tenant, holding that tenant's documents."""
    return _path("RAG_EVAL_DOCUMENTS_ROOT", PROJECT_ROOT / "data" / "tenants")


def warehouse_root() -> Path:
    """Parquet tables per tenant and dataset version (git-ignored)."""
    return _path("RAG_EVAL_WAREHOUSE", PROJECT_ROOT / "warehouse")


def dagster_home() -> Path:
    return _path("DAGSTER_HOME", PROJECT_ROOT / ".dagster_home")
