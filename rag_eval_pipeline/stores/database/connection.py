"""Connections to the results database, each transaction scoped to one tenant by row-level security.

`ResultsDatabase(url).tenant("acme")` yields a SQLAlchemy connection inside one transaction that set
`rag_eval.tenant` with `set_config(..., true)`: the setting dies with the transaction, so a pooled
connection never carries a tenant into the next one, and the RLS policies show, change and accept only
that tenant's rows. `verify()` refuses a role that would bypass those policies (a superuser, BYPASSRLS)
and a schema that is not at the code's migration head. Dagster-free: the core must never import it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, ProgrammingError

from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.stores.database.schema import APP_ROLE, SCHEMA, TENANT_SETTING

DATABASE_URL_VARIABLE = "RAG_EVAL_DATABASE_URL"  # the app role's URL, what the pipeline connects with
ADMIN_URL_VARIABLE = "RAG_EVAL_DATABASE_ADMIN_URL"  # a superuser's URL, used only by `rag-eval db upgrade`
DRIVERS = {"postgresql", "postgresql+psycopg2"}  # SQLAlchemy < 2.1 reads plain postgresql:// as psycopg2
CONNECT_TIMEOUT_S = 10  # a firewalled host fails in seconds instead of the OS's minutes
UPGRADE_HINT = "run `rag-eval db upgrade`"

_SET_TENANT = text("select set_config(:setting, :tenant, true)")  # true: local to this transaction


class DatabaseError(ValueError):
    """The results database cannot be used as configured; the one-line message says what to fix."""


def parse_url(url: str, variable: str = DATABASE_URL_VARIABLE) -> URL:
    """The URL as SQLAlchemy's URL on the psycopg2 driver, or DatabaseError naming the variable."""
    if not url or not url.strip():
        raise DatabaseError(f"{variable} is not set: give a postgresql:// URL")
    try:
        parsed = make_url(url.strip())
    except (ArgumentError, ValueError):
        # The message would repeat the URL, and with it any password: name the variable only.
        raise DatabaseError(f"{variable} is not a valid URL: use postgresql://user@host:port/database") from None
    if parsed.drivername not in DRIVERS:
        raise DatabaseError(f"{variable} must be a postgresql:// URL, got {parsed.drivername}://")
    if not parsed.database:
        raise DatabaseError(f"{variable} names no database: use postgresql://user@host:port/database")
    if "password" in parsed.query or "@" in (parsed.host or ""):
        # A password in the query string, or an '@' of the password read as part of the host, would be
        # shown in every message that names the server.
        raise DatabaseError(
            f"{variable}: put the password before the host, percent-encoded "
            "(postgresql://user:p%40ss@host:port/database), not in the query string"
        )
    return parsed.set(drivername="postgresql+psycopg2")


def shown(url: URL) -> str:
    """The server as it may appear in a message or a log: user@host:port/database, nothing else."""
    return f"{url.username or ''}@{url.host or 'localhost'}:{url.port or 5432}/{url.database}"


def build_engine(url: URL, **options) -> Engine:
    """A psycopg2 engine whose pool checks each connection before handing it out (a restarted server)."""
    connect_args: dict[str, object] = {"application_name": "rag_eval_pipeline"}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args, **options)


def connection_problem(error: DBAPIError, url: URL, variable: str) -> DatabaseError:
    """A failed connect as one line that says what to fix; the server's reason, never the password."""
    reason = server_message(error)
    if "does not exist" in reason and f'database "{url.database}"' in reason:
        return DatabaseError(
            f"the database {url.database!r} does not exist on {url.host or 'localhost'}:"
            f"{url.port or 5432} ({variable}): create it, then {UPGRADE_HINT}"
        )
    return DatabaseError(f"cannot connect to {shown(url)} ({variable}): {reason}")


def server_message(error: DBAPIError) -> str:
    """The driver's message on one line, without SQLAlchemy's statement and help link."""
    original = getattr(error, "orig", None) or error
    return " ".join(line.strip() for line in str(original).splitlines() if line.strip()) or type(original).__name__


class ResultsDatabase:
    """The results database as the app role sees it: one engine, transactions scoped to a tenant.

    `pool_size` and `max_overflow` go to SQLAlchemy's pool (tests use 1 and 0 to force reuse).
    """

    def __init__(self, url: str, *, pool_size: int = 5, max_overflow: int = 10) -> None:
        self.url = parse_url(url)
        self.engine = build_engine(self.url, pool_size=pool_size, max_overflow=max_overflow)
        self._verified = False
        self._verify_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ResultsDatabase({shown(self.url)!r})"

    def verify(self) -> None:
        """Refuse a role that bypasses row-level security, or a schema not at the code's head; once.

        Reads only, in a read-only transaction that is rolled back.
        """
        with self._verify_lock:
            if not self._verified:
                self._check()
                self._verified = True

    @contextmanager
    def tenant(self, tenant: str) -> Iterator[Connection]:
        """A connection in one transaction that sees and writes only `tenant`'s rows.

        Commits when the block ends, rolls back when it raises. A lost server is a DatabaseError;
        SQL errors (a refused row, a duplicate key) stay SQLAlchemy's.
        """
        validate_name("tenant", tenant)
        self.verify()
        connection = self._connect()
        try:
            with connection.begin():
                connection.execute(_SET_TENANT, {"setting": TENANT_SETTING, "tenant": tenant})
                yield connection
        except DBAPIError as error:
            if error.connection_invalidated:
                raise DatabaseError(
                    f"lost the connection to {shown(self.url)} ({DATABASE_URL_VARIABLE}) "
                    f"during tenant {tenant!r}'s transaction, which was not committed: "
                    f"{server_message(error)}"
                ) from error
            raise
        finally:
            connection.close()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def _connect(self) -> Connection:
        try:
            return self.engine.connect()
        except OperationalError as error:
            raise connection_problem(error, self.url, DATABASE_URL_VARIABLE) from error

    def _check(self) -> None:
        from rag_eval_pipeline.stores.database.upgrade import head_revision

        with self._connect() as connection, connection.begin() as transaction:
            connection.execute(text("set transaction read only"))
            role, superuser, bypass = connection.execute(
                text("select rolname, rolsuper, rolbypassrls from pg_roles where rolname = current_user")
            ).one()
            if superuser or bypass:
                raise DatabaseError(
                    f"refusing to run as {role}: it would see every tenant's rows; connect as {APP_ROLE}"
                )
            revision = _schema_revision(connection)
            transaction.rollback()
        head = head_revision()
        if revision is None:
            raise DatabaseError(
                f"the results database {self.url.database!r} has no {SCHEMA} schema "
                f"(or {role} may not read it): {UPGRADE_HINT}"
            )
        if revision != head:
            raise DatabaseError(
                f"the results database {self.url.database!r} is at revision {revision}, this "
                f"code needs {head}: {UPGRADE_HINT}"
            )


def _schema_revision(connection: Connection) -> str | None:
    """The schema's alembic revision; None when there is no version table the role may read."""
    readable = connection.execute(
        text(
            "select has_table_privilege(c.oid, 'select') from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = :schema and c.relname = 'alembic_version'"
        ),
        {"schema": SCHEMA},
    ).scalar()
    if not readable:
        return None
    try:
        return connection.execute(text(f"select version_num from {SCHEMA}.alembic_version")).scalar()
    except ProgrammingError:  # no USAGE on the schema
        return None


def open_results_database(url: str, *, pool_size: int = 5, max_overflow: int = 10) -> ResultsDatabase:
    """A verified ResultsDatabase: DatabaseError now, not at the first write, when it cannot be used."""
    database = ResultsDatabase(url, pool_size=pool_size, max_overflow=max_overflow)
    try:
        database.verify()
    except BaseException:
        database.dispose()
        raise
    return database
