"""The statements that keep tenants apart, shared by the revisions: the two roles, and a table's
owner, grants, and forced row-level security.

Roles belong to the whole cluster, not to one database: every statement on them tolerates a role that
exists already, made by an earlier upgrade or by a concurrent upgrade of another database.
"""

from __future__ import annotations

from alembic import op

SCHEMA = "rag_eval"
OWNER_ROLE = "rag_eval_owner"
APP_ROLE = "rag_eval_app"
TENANT_SETTING = "rag_eval.tenant"
POLICY = "tenant_isolation"
# The transaction's tenant; '' (the value a setting keeps after a transaction that set it locally)
# and unset both become NULL, which matches no row.
CURRENT_TENANT = f"NULLIF(current_setting('{TENANT_SETTING}', true), '')"


def _ensure_role(name: str, attributes: str, wrong: str) -> str:
    """A DO block that creates the role, or fixes it when `wrong` (a pg_roles condition) holds.

    Two upgrades that create it at once: the second waits for the first, then fails with a duplicate;
    the exception block swallows that. ALTER runs only when needed, so concurrent runs never update
    the same catalog row.
    """
    return f"""
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}') THEN
    BEGIN
      CREATE ROLE {name} {attributes};
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  ELSIF EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}' AND ({wrong})) THEN
    ALTER ROLE {name} {attributes};
  END IF;
END
$$"""


def ensure_roles() -> None:
    # The owner never logs in: nobody can connect as the role that may disable row-level security.
    op.execute(_ensure_role(OWNER_ROLE, "NOLOGIN NOSUPERUSER NOBYPASSRLS", "rolcanlogin OR rolsuper OR rolbypassrls"))
    # Trust or a password set by the operator (ALTER ROLE ... PASSWORD) authenticates it; none is set here.
    op.execute(
        _ensure_role(
            APP_ROLE,
            "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
            "NOT rolcanlogin OR rolsuper OR rolbypassrls OR rolcreatedb OR rolcreaterole",
        )
    )


def ensure_schema() -> None:
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    op.execute(f"ALTER SCHEMA {SCHEMA} OWNER TO {OWNER_ROLE}")
    op.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {APP_ROLE}")


def secure_table(name: str) -> None:
    """Hand the table to the owner, let the app role use its rows, and only the current tenant's.

    FORCE applies the policy to the owner too; a superuser or a BYPASSRLS role would still see
    everything, which is why the app refuses to run as one.
    """
    table = f"{SCHEMA}.{name}"
    op.execute(f"ALTER TABLE {table} OWNER TO {OWNER_ROLE}")  # its identity sequence follows
    op.execute(f"REVOKE ALL ON {table} FROM PUBLIC")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
    op.execute(
        f"CREATE POLICY {POLICY} ON {table} USING (tenant_id = {CURRENT_TENANT}) "
        f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )


def grant_sequences() -> None:
    """Identity columns draw from sequences; the app role may use them (not change them)."""
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {APP_ROLE}")


def let_app_read_versions(version_table: str) -> None:
    """verify() reads the revision as the app role."""
    op.execute(f"GRANT SELECT ON {SCHEMA}.{version_table} TO {APP_ROLE}")
