"""Each score row names the judge's span of its item: where its trace is (core/tracing.py).

Revision ID: 0003
Revises: 0002

Two text columns on metric_scores, '' for the rows written before (and whenever tracing is off). The
table keeps its row-level security and its grants: a column added to it is covered by both.
"""

import sqlalchemy as sa
from alembic import op

from rag_eval_pipeline.stores.database.migrations.security import SCHEMA

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = ("trace_id", "span_id")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("metric_scores", sa.Column(name, sa.Text(), nullable=False, server_default=""), schema=SCHEMA)


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("metric_scores", name, schema=SCHEMA)
