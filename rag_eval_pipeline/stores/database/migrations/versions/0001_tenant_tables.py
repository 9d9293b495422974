"""The roles, the rag_eval schema and its tenant tables, each with forced row-level security.

Revision ID: 0001
Revises: (none)

The tables are written out as they stand in schema.py at this revision, not read from it: a later
change to schema.py is a new revision, and test_migrations checks that the two agree.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from rag_eval_pipeline.stores.database.migrations.security import (
    SCHEMA,
    ensure_roles,
    ensure_schema,
    grant_sequences,
    let_app_read_versions,
    secure_table,
)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

VERSION_TABLE = "alembic_version"
AUDIT_KEY = ("dataset_version", "commit", "run_id")


def _table(name: str, *columns: sa.Column, key: tuple[str, ...]) -> None:
    op.create_table(
        name,
        sa.Column("tenant_id", sa.Text(), nullable=False),
        *columns,
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", *key, name=f"pk_{name}"),
        schema=SCHEMA,
    )
    op.create_index(f"ix_{name}_tenant_created", name, ["tenant_id", "created_at"], schema=SCHEMA)


def _audit_columns() -> list[sa.Column]:
    return [sa.Column(name, sa.Text(), nullable=False) for name in AUDIT_KEY]


TABLES = (
    "result_tables",
    "metric_scores",
    "regression_reports",
    "test_parameters",
    "golden_manifests",
    "audited_archives",
    "baseline_history",
)


def upgrade() -> None:
    ensure_roles()
    ensure_schema()
    _table(
        "result_tables",
        sa.Column("dataset_version", sa.Text(), nullable=False),
        sa.Column("table_name", sa.Text(), nullable=False),
        sa.Column("commit", sa.Text(), nullable=False, server_default=""),
        sa.Column("run_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("parquet", sa.LargeBinary(), nullable=False),
        key=("dataset_version", "table_name", "commit", "run_id"),
    )
    _table(
        "metric_scores",
        *_audit_columns(),
        sa.Column("row_no", sa.Integer(), nullable=False),
        sa.Column("qa_id", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("evidence", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("judge", sa.Text(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        key=(*AUDIT_KEY, "row_no"),
    )
    op.create_index(
        "ix_metric_scores_tenant_metric_created", "metric_scores", ["tenant_id", "metric", "created_at"], schema=SCHEMA
    )
    _table(
        "regression_reports",
        *_audit_columns(),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("summary", JSONB(), nullable=False),
        sa.Column("markdown", sa.Text(), nullable=False),
        sa.Column("html", sa.Text(), nullable=False),
        sa.Column("junit", sa.Text(), nullable=False, server_default=""),
        key=AUDIT_KEY,
    )
    _table("test_parameters", *_audit_columns(), sa.Column("parameters", JSONB(), nullable=False), key=AUDIT_KEY)
    _table(
        "golden_manifests",
        sa.Column("dataset_version", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("manifest", JSONB(), nullable=False),
        key=("dataset_version",),
    )
    _table("audited_archives", *_audit_columns(), key=AUDIT_KEY)
    _table(
        "baseline_history",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("dataset_version", sa.Text(), nullable=False),
        sa.Column("commit", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("branch", sa.Text(), nullable=False, server_default=""),
        sa.Column("run_id", sa.Text(), nullable=False, server_default=""),
        key=("id",),
    )
    for name in TABLES:
        secure_table(name)
    grant_sequences()
    let_app_read_versions(VERSION_TABLE)


def downgrade() -> None:
    # The roles stay: they belong to the cluster, and other databases may use them.
    for name in reversed(TABLES):
        op.drop_table(name, schema=SCHEMA)
