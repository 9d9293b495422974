"""Postgres for the tests: scratch databases on the shared local server, and private servers.

The shared server (127.0.0.1:5432, user postgres, trust) is never reconfigured: each test session makes
databases with names unique to its process and drops them at the end. Roles belong to the whole
cluster, so what creates them (the migrations) tolerates another session doing it at the same time.

`PrivateServer` runs a Postgres of its own from `initdb` in a temporary folder on a free port, for
tests that stop and restart the server. Postgres refuses to run as root, so as root it runs as the
`postgres` OS user (runuser).

Fixtures for a conftest to import: `shared_admin_url`, `upgraded_database` (a scratch database at the
migration head: its admin, workers' and service's URLs), `app_database` (a verified ResultsDatabase on it,
as the workers' role), `scratch_database_factory`, `private_server`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import URL

SHARED_HOST, SHARED_PORT = "127.0.0.1", 5432
SUPERUSER = "postgres"
WORKER_ROLE = "rag_eval_worker"  # what the pipeline's workers connect as
APP_ROLE = WORKER_ROLE  # the role the tests run the pipeline as
SERVICE_ROLE = "rag_eval_service"  # the gate service's role
LEGACY_APP_ROLE = "rag_eval_app"  # the one login before revision 0002, kept as a deprecated alias


def database_url(
    database: str, user: str = SUPERUSER, host: str = SHARED_HOST, port: int = SHARED_PORT, password: str | None = None
) -> str:
    return URL.create(
        "postgresql+psycopg2", username=user, password=password, host=host, port=port, database=database
    ).render_as_string(hide_password=False)


def unique_name(prefix: str) -> str:
    """A database or role name no other process picks: the pid, and a random part for this one."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def run_admin(sql: str, url: str | None = None, **parameters) -> list:
    """Run one statement outside a transaction (CREATE/DROP DATABASE need that) as the superuser."""
    engine = create_engine(url or database_url("postgres"), poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            result = connection.execute(text(sql), parameters)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


@contextmanager
def scratch_database(prefix: str = "rag_eval_test", host: str = SHARED_HOST, port: int = SHARED_PORT) -> Iterator[str]:
    """A new empty database; its name. Dropped at the end, with any connection still open to it."""
    name = unique_name(prefix)
    admin = database_url("postgres", host=host, port=port)
    run_admin(f'CREATE DATABASE "{name}"', admin)
    try:
        yield name
    finally:
        run_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', admin)


@contextmanager
def throwaway_role(attributes: str, may_connect_to: str | None = None) -> Iterator[str]:
    """A login role of the shared cluster with the attributes (e.g. BYPASSRLS), dropped at the end; granted
    CONNECT on the database `may_connect_to` (an upgraded database lets in only the project's roles)."""
    name = unique_name("rag_eval_test_role")
    run_admin(f"CREATE ROLE {name} LOGIN {attributes}")
    if may_connect_to:
        run_admin(f'GRANT CONNECT ON DATABASE "{may_connect_to}" TO {name}')
    try:
        yield name
    finally:
        if may_connect_to:
            run_admin(f'REVOKE ALL ON DATABASE "{may_connect_to}" FROM {name}')
        run_admin(f"DROP ROLE IF EXISTS {name}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_bin() -> Path:
    """The newest installed server's bin folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[-3]))
    if not found:
        pytest.skip("no Postgres server binaries under /usr/lib/postgresql/*/bin")
    return Path(found[-1]).parent


@dataclass
class PrivateServer:
    """A Postgres cluster of its own: `start()`, `stop()`, `url(database, user)`, `remove()`."""

    folder: Path
    port: int
    bin: Path
    os_user: str | None  # who runs the server; None: this process's user

    @classmethod
    def create(cls) -> PrivateServer:
        os_user = SUPERUSER if os.getuid() == 0 else None  # initdb and postgres refuse root
        folder = Path(tempfile.mkdtemp(prefix="rag_eval_pg_"))
        server = cls(folder=folder, port=free_port(), bin=postgres_bin(), os_user=os_user)
        if os_user:
            account = pwd.getpwnam(os_user)
            os.chown(folder, account.pw_uid, account.pw_gid)
        server._run(
            "initdb",
            "-D",
            str(server.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        return server

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return database_url(database, user=user, port=self.port)

    def start(self) -> None:
        # TCP on loopback only, no Unix socket (its default folder may not be writable), no fsync: a test server.
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """fast: end every session (an open transaction is rolled back), then shut down."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return (
            subprocess.run(self._command("pg_ctl", "-D", str(self.data), "status"), capture_output=True).returncode == 0
        )

    def remove(self) -> None:
        if self.data.exists() and self.running():
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.bin / program), *args]
        return ["runuser", "-u", self.os_user, "--", *command] if self.os_user else command

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(self._command(program, *args), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")


# --- fixtures -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpgradedDatabase:
    name: str
    admin_url: str  # the superuser: bypasses row-level security, for setup and checks only
    app_url: str  # rag_eval_worker: what the pipeline's workers connect as
    service_url: str  # rag_eval_service: what the gate service connects as


@pytest.fixture(scope="session")
def shared_admin_url() -> str:
    try:
        run_admin("select 1")
    except Exception as error:
        pytest.skip(f"the local Postgres at {SHARED_HOST}:{SHARED_PORT} does not answer: {error}")
    return database_url("postgres")


@pytest.fixture(scope="session")
def scratch_database_factory(shared_admin_url) -> Iterator[Callable[[], str]]:
    """Makes empty databases on the shared server; all dropped when the session ends."""
    with ExitStack() as stack:
        yield lambda: stack.enter_context(scratch_database())


@pytest.fixture(scope="session")
def upgraded_database(scratch_database_factory) -> UpgradedDatabase:
    """One database per test session at the migration head; tests use tenant names of their own."""
    from rag_eval_pipeline.stores.database.upgrade import upgrade

    name = scratch_database_factory()
    admin_url = database_url(name)
    upgrade(admin_url)
    return UpgradedDatabase(
        name=name,
        admin_url=admin_url,
        app_url=database_url(name, user=APP_ROLE),
        service_url=database_url(name, user=SERVICE_ROLE),
    )


@pytest.fixture(scope="session")
def app_database(upgraded_database):
    """A verified ResultsDatabase as the workers' role on the session's database."""
    from rag_eval_pipeline.stores.database.connection import open_results_database

    database = open_results_database(upgraded_database.app_url)
    yield database
    database.dispose()


@pytest.fixture(scope="session")
def private_server() -> Iterator[PrivateServer]:
    """A running private Postgres for the session; a test that stops it starts it again."""
    server = PrivateServer.create()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def fresh_private_server() -> Iterator[PrivateServer]:
    """A private Postgres of the test's own, for a test that needs a cluster where no role exists yet (the
    session's server holds the roles of whichever test upgraded a database on it first)."""
    server = PrivateServer.create()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def sample_row(table, tenant: str, key: int) -> dict:
    """A row of any results table for `tenant`, distinct per key, built from the column types (so a new
    table or column needs no edit here). Identity and created_at are left to the server."""
    from sqlalchemy import DateTime, Float, Integer, LargeBinary, Text
    from sqlalchemy.dialects.postgresql import JSONB

    row = {}
    for column in table.columns:
        if column.identity is not None or isinstance(column.type, DateTime):
            continue
        if column.name == "tenant_id":
            row[column.name] = tenant
        elif isinstance(column.type, JSONB):
            row[column.name] = {"key": key}
        elif isinstance(column.type, Text):
            row[column.name] = f"{column.name}-{key}"
        elif isinstance(column.type, Integer):
            row[column.name] = key
        elif isinstance(column.type, Float):
            row[column.name] = key / 100
        elif isinstance(column.type, LargeBinary):
            row[column.name] = f"blob-{key}".encode()
        else:
            raise TypeError(f"sample_row: no sample for {table.name}.{column.name} of type {column.type!r}")
    return row
