"""`upgrade(admin_url)`: bring the results database to the code's migration head (alembic, no alembic.ini).

Runs as a superuser (RAG_EVAL_DATABASE_ADMIN_URL): the first revision creates the `rag_eval` schema and
its tables with row-level security, the second the login roles of the service and the workers, what
each may do and its session timeouts, and closes the database to everyone else (docs/production.md lists
it all). Everything happens in one transaction, so a failed upgrade leaves the database as it was; a
second run finds the head and changes nothing. Two upgrades of one database wait for each other (an
advisory lock, within the lock timeout); upgrades of two databases of one cluster may race only on
creating the roles, which the revisions tolerate. The session carries the same lock and statement
timeouts as the pipeline's: an upgrade behind a worker's lock fails rather than stall every tenant.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, pool, text
from sqlalchemy.exc import DBAPIError, OperationalError

from rag_eval_pipeline.stores.database.connection import (
    ADMIN_URL_VARIABLE,
    DatabaseError,
    SessionTimeouts,
    build_engine,
    connection_problem,
    parse_url,
    server_message,
    shown,
    timeout_problem,
)
from rag_eval_pipeline.stores.database.schema import SCHEMA, metadata

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"  # in schema rag_eval, beside the tables it versions
_UPGRADE_LOCK = 0x7261675F  # advisory lock key ("rag_"): one upgrade of a database at a time
_INSUFFICIENT_PRIVILEGE = "42501"  # SQLSTATE: the admin URL's role may not create roles or schemas
_ALEMBIC = threading.Lock()  # alembic's `context` and `op` are process-wide: one migration per process at a time


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, built in code; `connection` is handed to env.py."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The revision the code's tables are at: what verify() expects the database to be at."""
    head = _scripts().get_current_head()
    if head is None:  # the package ships its migrations: none found is a broken install
        raise RuntimeError(f"no migration found in {MIGRATIONS}")
    return head


def known_revisions() -> set[str]:
    return {script.revision for script in _scripts().walk_revisions()}


def upgrade(admin_url: str, revision: str = "head", timeouts: SessionTimeouts | None = None) -> str:
    """Migrate the database of admin_url to `revision` (the head unless a test names an older one); the
    revision it is then at. DatabaseError when it cannot. `timeouts` default to the settings'."""
    url = parse_url(admin_url, ADMIN_URL_VARIABLE)
    timeouts = timeouts or SessionTimeouts.from_environment()
    engine = build_engine(url, timeouts, poolclass=pool.NullPool)
    try:
        try:
            connection = engine.connect()
        except OperationalError as error:
            raise connection_problem(error, url, ADMIN_URL_VARIABLE) from error
        with connection, connection.begin():
            connection.execute(text("select pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK})
            current = _current_revision(connection)
            if current is not None and current not in known_revisions():
                raise DatabaseError(
                    f"{shown(url)} is at revision {current}, which this code does not know "
                    f"(made by a newer release?): upgrade rag_eval_pipeline instead"
                )
            with _ALEMBIC:
                command.upgrade(alembic_config(connection), revision)
    except DBAPIError as error:
        problem = timeout_problem(error, timeouts)
        if problem is not None:
            raise DatabaseError(f"cannot upgrade {shown(url)} ({ADMIN_URL_VARIABLE}): {problem}") from error
        hint = (
            f"; {ADMIN_URL_VARIABLE} must name a superuser"
            if _INSUFFICIENT_PRIVILEGE == getattr(error.orig, "pgcode", None)
            else ""
        )
        raise DatabaseError(
            f"cannot upgrade {shown(url)} ({ADMIN_URL_VARIABLE}): {server_message(error)}{hint}"
        ) from error
    finally:
        engine.dispose()
    return head_revision() if revision == "head" else revision


def _current_revision(connection: Connection) -> str | None:
    if connection.execute(text("select to_regclass(:table)"), {"table": f"{SCHEMA}.{VERSION_TABLE}"}).scalar() is None:
        return None
    return connection.execute(text(f"select version_num from {SCHEMA}.{VERSION_TABLE}")).scalar()


def run_migrations(context: EnvironmentContext) -> None:
    """env.py's body: migrate on the connection upgrade() handed over, or on `sqlalchemy.url`
    when alembic's own command line runs it (`alembic -c some.ini upgrade head`)."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        url = parse_url(context.config.get_main_option("sqlalchemy.url", ""), "sqlalchemy.url")
        engine = build_engine(url, SessionTimeouts.from_environment(), poolclass=pool.NullPool)
        with engine.begin() as connection:
            _migrate(context, connection)
        engine.dispose()
        return
    _migrate(context, connection)


def _migrate(context: EnvironmentContext, connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        version_table_schema=SCHEMA,
        include_schemas=True,
        include_name=lambda name, kind, _: kind != "schema" or name == SCHEMA,
    )
    # The version table lives in the schema, which must exist before alembic creates that table.
    connection.execute(text(f"create schema if not exists {SCHEMA}"))
    with context.begin_transaction():
        context.run_migrations()
