"""Connections to the results database, each transaction scoped to one tenant by row-level security.

`ResultsDatabase(url).tenant("acme")` yields a SQLAlchemy connection inside one transaction that set
`rag_eval.tenant` with `set_config(..., true)`: the setting dies with the transaction, so a pooled
connection never carries a tenant into the next one, and the RLS policies show, change and accept only
that tenant's rows. `verify()` refuses a role that would bypass those policies (a superuser, BYPASSRLS)
and a schema that is not at the code's migration head. Dagster-free: the core must never import it.

Every session the project opens here carries a lock timeout and a statement timeout
(RAG_EVAL_DATABASE_LOCK_TIMEOUT_S, RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S): a session behind another's
table lock, or in a runaway statement, fails with one line that names the variable instead of stalling
every tenant. The advisory locks of the stores (`exclusive`) give up within the same lock timeout.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, ProgrammingError

from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.stores.database.schema import SCHEMA, SERVICE_ROLE, TENANT_SETTING, WORKER_ROLE

DATABASE_URL_VARIABLE = "RAG_EVAL_DATABASE_URL"  # a login role's URL (the workers' or the service's)
ADMIN_URL_VARIABLE = "RAG_EVAL_DATABASE_ADMIN_URL"  # a superuser's URL, used only by `rag-eval db upgrade`
DRIVERS = {"postgresql", "postgresql+psycopg2"}  # SQLAlchemy < 2.1 reads plain postgresql:// as psycopg2
CONNECT_TIMEOUT_S = 10  # a firewalled host fails in seconds instead of the OS's minutes
UPGRADE_HINT = "run `rag-eval db upgrade`"
LOCK_TIMEOUT_VARIABLE = "RAG_EVAL_DATABASE_LOCK_TIMEOUT_S"
STATEMENT_TIMEOUT_VARIABLE = "RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S"
_LONGEST_TIMEOUT_MS = 2_147_483_647  # what Postgres accepts for a timeout setting (about 24.8 days)
_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock wait cut by lock_timeout
_QUERY_CANCELED = "57014"  # SQLSTATE of a statement cut by statement_timeout (or canceled by someone)

_SET_TENANT = text("select set_config(:setting, :tenant, true)")  # true: local to this transaction
# The lock's wait for this transaction only; the session's own lock timeout applies again after it.
_SET_LOCAL_LOCK_TIMEOUT = text("select set_config('lock_timeout', :timeout, true)")
# An advisory lock released when its transaction ends, however it ends (or when the connection dies).
_ADVISORY_XACT_LOCK = text("select pg_advisory_xact_lock(hashtextextended(:key, 0))")


class DatabaseError(ValueError):
    """The results database cannot be used as configured; the one-line message says what to fix."""


class LockNotGranted(DatabaseError):
    """An advisory lock (`ResultsDatabase.exclusive`) stayed held by another session for `waited_s`."""

    def __init__(self, key: str, waited_s: float):
        super().__init__(
            f"the results database's lock {key!r} stayed held by another session for {waited_s:g} s "
            f"({LOCK_TIMEOUT_VARIABLE})"
        )
        self.key = key
        self.waited_s = waited_s


@dataclass(frozen=True)
class SessionTimeouts:
    """How long a session waits for a lock, and how long one statement may run, in seconds."""

    lock_s: float
    statement_s: float

    @classmethod
    def from_environment(cls) -> SessionTimeouts:
        """The timeouts the settings read (RAG_EVAL_DATABASE_LOCK_TIMEOUT_S etc., or their defaults)."""
        from rag_eval_pipeline import settings

        production = settings.load().production
        return cls(lock_s=production.database_lock_timeout_s, statement_s=production.database_statement_timeout_s)

    def startup_options(self) -> str:
        """libpq's `options`: the server applies them to the session before its first statement."""
        return f"-c lock_timeout={_milliseconds(self.lock_s)} -c statement_timeout={_milliseconds(self.statement_s)}"


def _milliseconds(seconds: float) -> str:
    """At least 1 ms: a timeout that rounds to 0 would switch the timeout off."""
    return f"{min(max(1, math.ceil(seconds * 1000)), _LONGEST_TIMEOUT_MS)}ms"


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


def build_engine(url: URL, timeouts: SessionTimeouts, **options) -> Engine:
    """A psycopg2 engine whose pool checks each connection before handing it out (a restarted server),
    and whose every session carries the lock and statement timeouts."""
    connect_args: dict[str, object] = {"application_name": "rag_eval_pipeline"}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    given = url.query.get("options", "")  # the URL's own options come after ours: they may override them
    given = " ".join(given) if isinstance(given, tuple) else given
    connect_args["options"] = f"{timeouts.startup_options()} {given}".strip()
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


def is_lock_timeout(error: DBAPIError) -> bool:
    return getattr(error.orig, "pgcode", None) == _LOCK_NOT_AVAILABLE


def timeout_problem(error: DBAPIError, timeouts: SessionTimeouts) -> DatabaseError | None:
    """A statement cut by the lock or statement timeout as one line naming the variable; None otherwise."""
    if is_lock_timeout(error):
        return DatabaseError(
            f"the results database did not grant a lock within {timeouts.lock_s:g} s "
            f"({LOCK_TIMEOUT_VARIABLE}): another session holds it"
        )
    if getattr(error.orig, "pgcode", None) != _QUERY_CANCELED:
        return None
    reason = server_message(error)
    if "statement timeout" in reason:
        return DatabaseError(
            f"a statement on the results database ran longer than {timeouts.statement_s:g} s "
            f"({STATEMENT_TIMEOUT_VARIABLE}) and was canceled"
        )
    return DatabaseError(f"a statement on the results database was canceled: {reason}")


class ResultsDatabase:
    """The results database as a login role sees it: one engine, transactions scoped to a tenant.

    `pool_size` and `max_overflow` go to SQLAlchemy's pool (tests use 1 and 0 to force reuse);
    `timeouts` default to the settings' (the environment's).
    """

    def __init__(
        self, url: str, *, pool_size: int = 5, max_overflow: int = 10, timeouts: SessionTimeouts | None = None
    ) -> None:
        self.url = parse_url(url)
        self.timeouts = timeouts or SessionTimeouts.from_environment()
        self.engine = build_engine(self.url, self.timeouts, pool_size=pool_size, max_overflow=max_overflow)
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

        Commits when the block ends, rolls back when it raises. A lost server, or a statement cut by
        the lock or statement timeout, is a DatabaseError; SQL errors (a refused row, a duplicate key)
        stay SQLAlchemy's.
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
            problem = timeout_problem(error, self.timeouts)
            if problem is not None:
                raise DatabaseError(f"{problem}; tenant {tenant!r}'s transaction was rolled back") from error
            raise
        finally:
            connection.close()

    @contextmanager
    def exclusive(self, key: str, longest_wait_s: float) -> Iterator[None]:
        """Hold the advisory lock named `key` (exclusive across processes and machines) until the block
        ends, however it ends, or the holder's connection dies: a transaction-scoped lock on a connection
        of its own. Waits at most `longest_wait_s`, and never longer than the session's lock timeout;
        LockNotGranted when another session held it all that time. Re-entrant in one thread: a block
        inside a block that holds the key does not wait for itself."""
        held = _held_keys()
        if key in held:
            yield
            return
        waited_s = min(longest_wait_s, self.timeouts.lock_s)
        with self._connect() as connection, connection.begin():
            connection.execute(_SET_LOCAL_LOCK_TIMEOUT, {"timeout": _milliseconds(waited_s)})
            try:
                connection.execute(_ADVISORY_XACT_LOCK, {"key": key})
            except OperationalError as error:
                if is_lock_timeout(error):
                    raise LockNotGranted(key, waited_s) from error
                raise
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def _role_and_revision(self) -> tuple[str, str | None]:
        """The connecting role and the schema's revision; DatabaseError for a role that bypasses RLS."""
        with self._connect() as connection, connection.begin() as transaction:
            connection.execute(text("set transaction read only"))
            role, superuser, bypass = connection.execute(
                text("select rolname, rolsuper, rolbypassrls from pg_roles where rolname = current_user")
            ).one()
            if superuser or bypass:
                raise DatabaseError(
                    f"refusing to run as {role}: it would see every tenant's rows; connect as {WORKER_ROLE} "
                    f"(or {SERVICE_ROLE}, the gate service)"
                )
            revision = _schema_revision(connection)
            transaction.rollback()
        return role, revision

    def _connect(self) -> Connection:
        try:
            return self.engine.connect()
        except OperationalError as error:
            raise connection_problem(error, self.url, DATABASE_URL_VARIABLE) from error

    def _check(self) -> None:
        from rag_eval_pipeline.stores.database.upgrade import head_revision

        try:
            role, revision = self._role_and_revision()
        except DBAPIError as error:
            problem = timeout_problem(error, self.timeouts)
            if problem is None:
                raise
            raise problem from error
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


def open_results_database(
    url: str, *, pool_size: int = 5, max_overflow: int = 10, timeouts: SessionTimeouts | None = None
) -> ResultsDatabase:
    """A verified ResultsDatabase: DatabaseError now, not at the first write, when it cannot be used."""
    database = ResultsDatabase(url, pool_size=pool_size, max_overflow=max_overflow, timeouts=timeouts)
    try:
        database.verify()
    except BaseException:
        database.dispose()
        raise
    return database


_THREAD = threading.local()


def _held_keys() -> set[str]:
    """The advisory locks this thread holds (through ResultsDatabase.exclusive)."""
    if not hasattr(_THREAD, "keys"):
        _THREAD.keys = set()
    return _THREAD.keys
