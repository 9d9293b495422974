"""Storage: one seam between the pipeline and wherever its tables, reports, baselines and caches live.

`open_stores` is the one place that decides the mode; everything else types against the protocols in
`protocols.py` (`ResultsStore`, `BaselineStore`) and never asks which store it holds. `layout.py` names
the tables and files every store keeps. The modes:

- local (the default): Parquet, JSON and JSONL files under the warehouse folder (`local.py`,
  `local_baselines.py`); SQLite caches (`sqlite_cache.py`).
- production (`RAG_EVAL_DATABASE_URL` set): golden sets, audits, reports and baselines in Postgres with
  row-level security per tenant (`database/`); the large intermediate tables in an S3-compatible object
  store (`object_store.py`) when `RAG_EVAL_OBJECT_STORE_URL` is set; caches in Redis (`redis_cache.py`)
  when `RAG_EVAL_CACHE_URL` is. With the database but no object store, the large tables stay in the local
  warehouse: one machine only, and runs on shared workers are refused (they would not find them).

`version_tables.py` routes a dataset version's tables to their store and records what each was built
from; `cache.py` opens the cache a location names. Nothing here imports Dagster.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from rag_eval_pipeline.stores.protocols import BaselineStore, ResultsStore

LOCAL, PRODUCTION = "local", "production"


@dataclass(frozen=True)
class Stores:
    """Where this process keeps the results and the baselines, and in which mode."""

    results: ResultsStore
    baselines: BaselineStore
    mode: str  # LOCAL or PRODUCTION


def open_stores(warehouse_root: Path | str, database_url: str = "") -> Stores:
    """The stores of a deployment: the local warehouse, or (with a results-database URL) the results database."""
    if not database_url:
        from rag_eval_pipeline.stores.local import Warehouse
        from rag_eval_pipeline.stores.local_baselines import LocalBaselineStore

        warehouse = Warehouse(warehouse_root)
        return Stores(warehouse, LocalBaselineStore(warehouse), LOCAL)
    from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore
    from rag_eval_pipeline.stores.database.results import DatabaseStore

    results = DatabaseStore(results_database(database_url, os.getpid()))
    return Stores(results, DatabaseBaselineStore(results), PRODUCTION)


@functools.cache
def results_database(url: str, pid: int):
    """One verified ResultsDatabase (and its connection pool) per URL and process: keyed by the pid, so a
    forked child (a Celery or multiprocess worker) opens its own connections instead of sharing its parent's."""
    from rag_eval_pipeline.stores.database.connection import open_results_database

    return open_results_database(url)
