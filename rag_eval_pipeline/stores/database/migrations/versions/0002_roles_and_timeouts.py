"""A login role for the gate service and one for the workers, separate; session timeouts per role; the
database closed to every other role of the cluster.

Revision ID: 0002
Revises: 0001

- `rag_eval_service` (the gate service) and `rag_eval_worker` (Celery workers, the daemon, an operator's
  `rag-eval`): logins, no superuser, no BYPASSRLS, may create nothing, members of nothing that would let
  one see the other's statements or end its sessions. Both may read and write the tenant tables' rows
  (row-level security still confines each transaction to its tenant) and read the revision.
- `rag_eval_app`, the one login of 0001, keeps the workers' rights as a deprecated alias, so a deployment
  whose RAG_EVAL_DATABASE_URL names it goes on working until it moves to `rag_eval_worker`.
- None of them may read the sequences (they would tell every tenant's number of promotions).
- Only these three may connect to the database; PUBLIC loses CONNECT and TEMPORARY on it, and every
  right on schema public.
- Each has session defaults on this database: the lock and statement timeouts the pipeline sends anyway
  (for a session that does not, e.g. psql), and an idle-in-transaction timeout that ends a session
  which holds a transaction, and its locks, open for 15 minutes without a statement.
"""

from rag_eval_pipeline.stores.database.migrations.security import (
    APP_ROLE,
    SERVICE_ROLE,
    WORKER_ROLE,
    close_database,
    ensure_login_role,
    grant_sequences,
    grant_tenant_tables,
    reopen_database,
    reset_session_defaults,
    revoke_sequences,
    revoke_tenant_tables,
    separate,
    set_session_defaults,
)

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

VERSION_TABLE = "alembic_version"
TABLES = (
    "result_tables",
    "metric_scores",
    "regression_reports",
    "test_parameters",
    "golden_manifests",
    "audited_archives",
    "baseline_history",
)
NEW_LOGINS = (SERVICE_ROLE, WORKER_ROLE)
LOGINS = (*NEW_LOGINS, APP_ROLE)
# No project session holds a transaction open for long without a statement: the longest are a tenant's
# promotion lock and a version's lock, held over one report's or one table's writes.
SESSION_DEFAULTS = {
    "lock_timeout": "10s",
    "statement_timeout": "120s",
    "idle_in_transaction_session_timeout": "15min",
}


def upgrade() -> None:
    for role in LOGINS:
        ensure_login_role(role)
    separate(LOGINS)
    close_database(LOGINS)
    grant_tenant_tables(TABLES, NEW_LOGINS, VERSION_TABLE)
    revoke_sequences(APP_ROLE)
    for role in LOGINS:
        set_session_defaults(role, SESSION_DEFAULTS)


def downgrade() -> None:
    # The roles stay: they belong to the cluster, and other databases may use them.
    for role in LOGINS:
        reset_session_defaults(role)
    grant_sequences()
    revoke_tenant_tables(TABLES, NEW_LOGINS, VERSION_TABLE)
    reopen_database(LOGINS)
