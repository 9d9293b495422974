"""The results database's tables (schema `rag_eval`), as SQLAlchemy Core metadata.

Every table is tenant-scoped: `tenant_id` comes first in its primary key, an index on
`(tenant_id, created_at)` serves "this tenant's latest ...", and row-level security (enabled and
forced by the migrations) lets a connection see only the rows of the tenant its transaction names.

The audit tables carry the audited commit and the Dagster run in their keys, so two audits of one
commit (two pull requests, a re-run) never overwrite each other's rows.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "rag_eval"
TENANT_SETTING = "rag_eval.tenant"  # the per-transaction setting the RLS policies read
OWNER_ROLE = "rag_eval_owner"  # owns the schema and tables; cannot log in
# The login roles: not the owner, no BYPASSRLS, never a superuser, members of nothing. Separate roles, so
# neither sees the other's statements in pg_stat_activity nor may end the other's sessions.
SERVICE_ROLE = "rag_eval_service"  # the gate service (`rag-eval serve`)
WORKER_ROLE = "rag_eval_worker"  # Celery workers, the daemon, `rag-eval` run by an operator
APP_ROLE = "rag_eval_app"  # deprecated: the one login before revision 0002; kept with the workers' rights
LOGIN_ROLES = (SERVICE_ROLE, WORKER_ROLE, APP_ROLE)

metadata = MetaData(schema=SCHEMA)


def _created_at() -> Column:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


# What identifies one audit of a tenant: the golden-set version, the candidate's commit and the run.
AUDIT_KEY = ("dataset_version", "commit", "run_id")


def _audit_key_columns() -> list[Column]:
    return [Column(name, Text, nullable=False) for name in AUDIT_KEY]


def _tenant_table(name: str, *columns, primary_key: tuple[str, ...]) -> Table:
    table = Table(
        name,
        metadata,
        Column("tenant_id", Text, nullable=False),
        *columns,
        _created_at(),
        PrimaryKeyConstraint("tenant_id", *primary_key, name=f"pk_{name}"),
    )
    Index(f"ix_{name}_tenant_created", table.c.tenant_id, table.c.created_at)
    return table


# Whole tables of a partition or of an audit, stored as Parquet: the golden set, rejected items,
# candidate outputs, the report's per-metric table. `commit` and `run_id` are '' for a partition's
# own tables (the golden set is the same for every commit).
result_tables = _tenant_table(
    "result_tables",
    Column("dataset_version", Text, nullable=False),
    Column("table_name", Text, nullable=False),
    Column("commit", Text, nullable=False, server_default=""),
    Column("run_id", Text, nullable=False, server_default=""),
    Column("row_count", Integer, nullable=False),
    Column("parquet", LargeBinary, nullable=False),
    primary_key=("dataset_version", "table_name", "commit", "run_id"),
)

# One row per (item, metric) of an audit: what the metric history and the comparison read.
metric_scores = _tenant_table(
    "metric_scores",
    *_audit_key_columns(),
    Column("row_no", Integer, nullable=False),  # keeps the asset's row order
    Column("qa_id", Text, nullable=False),
    Column("metric", Text, nullable=False),
    Column("score", Float, nullable=True),  # NULL: not measured (status and reason say why)
    Column("status", Text, nullable=False),
    Column("reason", Text, nullable=False, server_default=""),
    Column("evidence", Text, nullable=False, server_default="{}"),
    Column("judge", Text, nullable=False),
    Column("k", Integer, nullable=False),
    # The judge's span of the item (core/tracing.py), "" when tracing was off (revision 0003).
    Column("trace_id", Text, nullable=False, server_default=""),
    Column("span_id", Text, nullable=False, server_default=""),
    primary_key=(*AUDIT_KEY, "row_no"),
)
Index(
    "ix_metric_scores_tenant_metric_created",
    metric_scores.c.tenant_id,
    metric_scores.c.metric,
    metric_scores.c.created_at,
)

# The rendered regression report of one audit, and its verdict.
regression_reports = _tenant_table(
    "regression_reports",
    *_audit_key_columns(),
    Column("verdict", Text, nullable=False),
    Column("summary", JSONB, nullable=False),
    Column("markdown", Text, nullable=False),
    Column("html", Text, nullable=False),
    Column("junit", Text, nullable=False, server_default=""),
    primary_key=AUDIT_KEY,
)

# The tolerances an audit was judged with (test parameters), per audit.
test_parameters = _tenant_table(
    "test_parameters",
    *_audit_key_columns(),
    Column("parameters", JSONB, nullable=False),
    primary_key=AUDIT_KEY,
)

# A published golden-set version: written last, it is what makes the version visible to audits.
golden_manifests = _tenant_table(
    "golden_manifests",
    Column("dataset_version", Text, nullable=False),
    Column("content_hash", Text, nullable=False),
    Column("manifest", JSONB, nullable=False),
    primary_key=("dataset_version",),
)

# A complete audit (its scores and outputs are stored): a commit that may become a baseline.
audited_archives = _tenant_table(
    "audited_archives",
    *_audit_key_columns(),
    primary_key=AUDIT_KEY,
)

# Every promotion, oldest first; the latest per version is the current baseline.
baseline_history = _tenant_table(
    "baseline_history",
    Column("id", BigInteger, Identity(always=True), nullable=False),
    Column("dataset_version", Text, nullable=False),
    Column("commit", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("branch", Text, nullable=False, server_default=""),
    Column("run_id", Text, nullable=False, server_default=""),
    primary_key=("id",),
)

TENANT_TABLES = tuple(metadata.sorted_tables)
