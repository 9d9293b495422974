"""Retention in the results database: a tenant's audits and submitted outputs older than its retention.

An audit is every row keyed by one (version, commit, run) in the audit tables; a submission is the
result_tables row keyed by (version, commit, submission id). Either goes whole, in the caller's tenant
transaction, once its newest row is older than the cutoff, unless its commit is in the tenant's baseline
history. A version's own tables (commit '') and its manifest are never selected.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, Connection, Table, delete, func, literal, select, tuple_, union_all

from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.protocols import SUBMITTED_OUTPUTS, Pruned

# The archive marker first: an audit stops being a baseline candidate before its tables go.
AUDIT_ROW_TABLES = (
    schema.audited_archives,
    schema.metric_scores,
    schema.regression_reports,
    schema.test_parameters,
    schema.result_tables,
)
BATCH = 500  # keys per statement: a long prune is many short statements, each under the statement timeout


@dataclass(frozen=True)
class AuditKey:
    version: str
    commit: str
    run_id: str  # a Dagster run id, or a submission id
    submission: bool


def prune_audits(
    connection: Connection, older_than: datetime, keep: Collection[str] = (), dry_run: bool = False
) -> list[Pruned]:
    """Delete (dry_run: only measure) the tenant's old audits and submissions, except those of a baseline
    commit and those whose run or submission id is in keep; what was removed, by kind."""
    if older_than.tzinfo is None:
        raise ValueError("older_than must be timezone-aware: created_at is compared in UTC")
    keys = [key for key in _old_keys(connection, older_than) if key.run_id not in keep]
    audits = [key for key in keys if not key.submission]
    submissions = [key for key in keys if key.submission]
    pruned = [
        Pruned("audits", len(audits), _stored_bytes(connection, audits)),
        Pruned("submitted outputs", len(submissions), _stored_bytes(connection, submissions)),
    ]
    if not dry_run:
        for table in AUDIT_ROW_TABLES:
            for batch in _batches(keys):
                connection.execute(delete(table).where(_keyed(table, batch)))
    return pruned


def _old_keys(connection: Connection, older_than: datetime) -> list[AuditKey]:
    """Every audit and submission whose newest row is older than older_than, of a commit never a baseline."""
    rows = union_all(*(_key_rows(table) for table in AUDIT_ROW_TABLES)).subquery("audit_rows")
    baselines = select(schema.baseline_history.c.commit)  # row-level security: this tenant's only
    query = (
        select(rows.c.dataset_version, rows.c.commit, rows.c.run_id, func.bool_or(rows.c.submission))
        .where(rows.c.commit.not_in(baselines))
        .group_by(rows.c.dataset_version, rows.c.commit, rows.c.run_id)
        .having(func.max(rows.c.created_at) < older_than)
        .order_by(rows.c.dataset_version, rows.c.commit, rows.c.run_id)
    )
    return [AuditKey(*row) for row in connection.execute(query)]


def _key_rows(table: Table):
    """(version, commit, run, created_at, whether it is a submission) of the table's audit rows."""
    submission = (
        table.c.table_name == SUBMITTED_OUTPUTS if "table_name" in table.c else literal(False, Boolean)
    ).label("submission")
    return select(table.c.dataset_version, table.c.commit, table.c.run_id, table.c.created_at, submission).where(
        table.c.commit != ""
    )


def _stored_bytes(connection: Connection, keys: list[AuditKey]) -> int:
    """The rows' stored size (pg_column_size of each whole row, its large values as stored, compressed or not)."""
    total = 0
    for table in AUDIT_ROW_TABLES:
        size = func.coalesce(func.sum(func.pg_column_size(table.table_valued())), 0)
        for batch in _batches(keys):
            total += int(connection.execute(select(size).where(_keyed(table, batch))).scalar_one())
    return total


def _keyed(table: Table, keys: list[AuditKey]):
    return tuple_(table.c.dataset_version, table.c.commit, table.c.run_id).in_(
        [(key.version, key.commit, key.run_id) for key in keys]
    )


def _batches(keys: list[AuditKey]) -> Iterator[list[AuditKey]]:
    for start in range(0, len(keys), BATCH):
        yield keys[start : start + BATCH]
