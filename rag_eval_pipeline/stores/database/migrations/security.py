"""The statements that keep tenants apart, shared by the revisions: the roles, a table's owner, grants,
and forced row-level security, and (from 0002) the login roles' separation, their session timeouts and
the database closed to every other role.

Roles belong to the whole cluster, not to one database: every statement on them tolerates a role that
exists already, made by an earlier upgrade or by a concurrent upgrade of another database. What a role
may do and its timeouts are set per database (GRANT ... ON DATABASE, ALTER ROLE ... IN DATABASE), so an
upgrade of one database neither changes another nor updates a catalog row another upgrade updates.
Names and values are written here as each revision needs them, not read from schema.py: a revision
must do tomorrow what it did when it was released.
"""

from __future__ import annotations

from alembic import op

SCHEMA = "rag_eval"
OWNER_ROLE = "rag_eval_owner"
APP_ROLE = "rag_eval_app"  # the one login of 0001; from 0002 a deprecated alias of the workers' role
SERVICE_ROLE = "rag_eval_service"
WORKER_ROLE = "rag_eval_worker"
LOGIN_ATTRIBUTES = "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION"
# Built-in roles whose members read every session's statement or may end other roles' sessions.
OVERSEEING_ROLES = ("pg_monitor", "pg_read_all_stats", "pg_signal_backend")
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


def ensure_login_role(name: str) -> None:
    """A login that bypasses nothing and may create nothing; created, or its attributes put right."""
    op.execute(
        _ensure_role(
            name,
            LOGIN_ATTRIBUTES,
            "NOT rolcanlogin OR rolsuper OR rolbypassrls OR rolcreatedb OR rolcreaterole OR rolreplication",
        )
    )


def _names(roles: tuple[str, ...]) -> str:
    return ", ".join(f"'{role}'" for role in roles)


def separate(logins: tuple[str, ...]) -> None:
    """Revoke any membership of a login in another login, in the owner, or in a built-in role that sees or
    ends other sessions: a member sees the role's statements in pg_stat_activity, may end its sessions
    (pg_terminate_backend) and, in the owner, switch row-level security off. Only grants found are
    revoked, so a database without them updates no shared catalog row."""
    granted = (*logins, OWNER_ROLE, *OVERSEEING_ROLES)
    op.execute(f"""
DO $$
DECLARE
  membership record;
BEGIN
  FOR membership IN
    SELECT pg_get_userbyid(m.roleid) AS granted, pg_get_userbyid(m.member) AS member,
           pg_get_userbyid(m.grantor) AS grantor
    FROM pg_auth_members m
    WHERE pg_get_userbyid(m.member) IN ({_names(logins)}) AND pg_get_userbyid(m.roleid) IN ({_names(granted)})
  LOOP
    EXECUTE format('REVOKE %I FROM %I GRANTED BY %I', membership.granted, membership.member, membership.grantor);
  END LOOP;
END
$$""")


def close_database(logins: tuple[str, ...]) -> None:
    """Only the logins may connect to this database (a role of the cluster is not let in by PUBLIC), and
    they may not create temporary tables; nobody but the owner of schema public may use it."""
    grantees = ", ".join(logins)
    op.execute(f"""
DO $$
BEGIN
  EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO {grantees}', current_database());
  IF EXISTS (SELECT FROM pg_namespace WHERE nspname = 'public') THEN
    REVOKE ALL ON SCHEMA public FROM PUBLIC;
  END IF;
END
$$""")


def reopen_database(logins: tuple[str, ...]) -> None:
    """What close_database took, given back as Postgres 15 creates a database (for a downgrade)."""
    grantees = ", ".join(logins)
    op.execute(f"""
DO $$
BEGIN
  EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM {grantees}', current_database());
  EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO PUBLIC', current_database());
  IF EXISTS (SELECT FROM pg_namespace WHERE nspname = 'public') THEN
    GRANT USAGE ON SCHEMA public TO PUBLIC;
  END IF;
END
$$""")


def set_session_defaults(role: str, settings: dict[str, str]) -> None:
    """The role's defaults for its sessions on this database only (ALTER ROLE ... IN DATABASE). A client
    may still set its own (the pipeline sends its lock and statement timeouts when it connects)."""
    statements = "\n".join(
        f"  EXECUTE format('ALTER ROLE {role} IN DATABASE %I SET {name} = %L', current_database(), '{value}');"
        for name, value in settings.items()
    )
    op.execute(f"DO $$\nBEGIN\n{statements}\nEND\n$$")


def reset_session_defaults(role: str) -> None:
    op.execute(f"DO $$ BEGIN EXECUTE format('ALTER ROLE {role} IN DATABASE %I RESET ALL', current_database()); END $$")


def grant_tenant_tables(tables: tuple[str, ...], roles: tuple[str, ...], version_table: str) -> None:
    """The roles may use the schema, read and write the tenant tables' rows (row-level security still
    confines them to the transaction's tenant) and read the revision; nothing else."""
    grantees = ", ".join(roles)
    op.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {grantees}")
    for name in tables:
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {SCHEMA}.{name} TO {grantees}")
    op.execute(f"GRANT SELECT ON {SCHEMA}.{version_table} TO {grantees}")


def revoke_tenant_tables(tables: tuple[str, ...], roles: tuple[str, ...], version_table: str) -> None:
    grantees = ", ".join(roles)
    for name in (*tables, version_table):
        op.execute(f"REVOKE ALL ON {SCHEMA}.{name} FROM {grantees}")
    op.execute(f"REVOKE ALL ON SCHEMA {SCHEMA} FROM {grantees}")


def revoke_sequences(role: str) -> None:
    """An identity column draws from its sequence without any right on it; reading the sequence would
    tell every tenant's number of promotions."""
    op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {SCHEMA} FROM {role}")


def grant_sequences() -> None:
    """Identity columns draw from sequences; the app role may use them (not change them)."""
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {APP_ROLE}")


def let_app_read_versions(version_table: str) -> None:
    """verify() reads the revision as the app role."""
    op.execute(f"GRANT SELECT ON {SCHEMA}.{version_table} TO {APP_ROLE}")
