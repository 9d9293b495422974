"""What the retention tests make old, or add, without waiting: Dagster runs recorded by hand, runs and files
dated back (the instance's runs table and the files' modification times, as an administrator would)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.storage.runs.schema import RunsTable
from dagster._core.storage.runs.sql_run_storage import SqlRunStorage

from rag_eval_pipeline.automation.run_health import TENANT_TAG
from rag_eval_pipeline.core.names import COMMIT_TAG

OLD_DAYS = 200  # past the default retention of 90 days


def add_run(
    instance: DagsterInstance, tenant: str, commit: str, status: DagsterRunStatus, candidate: str = "reference"
) -> str:
    """A run of the audit job recorded in the instance (never executed); its id."""
    config = {"ops": {"candidate_outputs": {"config": {"candidate": candidate, "commit": commit}}}}
    run = DagsterRun(
        job_name="audit",
        run_id=str(uuid.uuid4()),
        run_config=config,
        status=status,
        tags={TENANT_TAG: tenant, COMMIT_TAG: commit},
    )
    return instance.add_run(run).run_id


def age_runs(instance: DagsterInstance, run_ids: Iterable[str], days: int = OLD_DAYS) -> None:
    """Date the runs' creation back by days, in the instance's runs table."""
    created = (datetime.now(timezone.utc) - timedelta(days=days)).replace(tzinfo=None)
    storage = instance.run_storage
    assert isinstance(storage, SqlRunStorage), storage  # the tests' instances keep runs in SQLite
    with storage.connect() as connection:
        for run_id in run_ids:
            connection.execute(RunsTable.update().where(RunsTable.c.run_id == run_id).values(create_timestamp=created))


def age_files(paths: Iterable[Path], days: int = OLD_DAYS) -> None:
    """Date the files (and, for a folder, everything in it) back by days."""
    then = time.time() - days * 86400
    for path in paths:
        for inner in [path, *(path.rglob("*") if path.is_dir() else ())]:
            os.utime(inner, (then, then))
