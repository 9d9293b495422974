"""Every session the project opens to the results database carries a lock timeout and a statement timeout
(RAG_EVAL_DATABASE_LOCK_TIMEOUT_S, RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S): a session behind another's lock,
a tenant's promotion lock or a version's lock, or in a runaway statement, fails with one line naming the
variable, and the other session keeps what it holds. The lock timeout is 1 s here; the tests assert the
error, not the time."""

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import pytest
from sqlalchemy import Connection, create_engine, pool, text

from rag_eval_pipeline import cli, settings
from rag_eval_pipeline.reporting.baselines import EXPLICIT
from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore
from rag_eval_pipeline.stores.database.connection import DatabaseError, ResultsDatabase, SessionTimeouts
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.stores.database.upgrade import _UPGRADE_LOCK, upgrade
from rag_eval_pipeline_tests.support.postgres import APP_ROLE, database_url, run_admin
from rag_eval_pipeline_tests.test_reporting.test_baselines import _outputs, _scores

pytestmark = [pytest.mark.postgres]

SHORT = SessionTimeouts(lock_s=1, statement_s=60)
HANG_S = 60  # far beyond the 1 s timeout: only a session that never gives up reaches it
LOCK_REFUSED = (
    "the results database did not grant a lock within 1 s (RAG_EVAL_DATABASE_LOCK_TIMEOUT_S): another session holds it"
)


@contextmanager
def short_database(url: str, timeouts: SessionTimeouts | None = SHORT) -> Iterator[ResultsDatabase]:
    """A ResultsDatabase with these timeouts (None: the settings')."""
    database = ResultsDatabase(url, timeouts=timeouts)
    try:
        yield database
    finally:
        database.dispose()


@contextmanager
def admin_transaction(url: str) -> Iterator[Connection]:
    """A superuser's session inside one open transaction: what it locks stays locked until the block ends."""
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection, connection.begin():
            yield connection
    finally:
        engine.dispose()


def _holds_table_lock(admin_url: str, pid: int, table: str) -> bool:
    return run_admin(
        "select count(*) from pg_locks where pid = :pid and relation = to_regclass(:table) "
        "and mode = 'AccessExclusiveLock' and granted",
        admin_url,
        pid=pid,
        table=f"rag_eval.{table}",
    ) == [(1,)]


def failure(call: Callable[[], object]) -> BaseException:
    """What `call` raised, run in a thread so that a call that waits for ever fails the test instead of
    hanging it (the caller's lock is released when its block ends, and the call then returns)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            raised.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), f"still waiting after {HANG_S} s: the session never gave up"
    assert raised, "it succeeded"
    return raised[0]


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message, message
    return message


def test_every_session_carries_the_timeouts_of_the_settings(upgraded_database, monkeypatch):
    def shown(database: ResultsDatabase) -> list[str]:
        with database.tenant("shown") as connection:
            return [
                connection.execute(text(f"show {name}")).scalar_one() for name in ("lock_timeout", "statement_timeout")
            ]

    monkeypatch.delenv("RAG_EVAL_DATABASE_LOCK_TIMEOUT_S", raising=False)
    monkeypatch.delenv("RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S", raising=False)
    with short_database(upgraded_database.app_url, timeouts=None) as database:
        assert shown(database) == ["10s", "2min"]
    monkeypatch.setenv("RAG_EVAL_DATABASE_LOCK_TIMEOUT_S", "2.5")
    monkeypatch.setenv("RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S", "30")
    with short_database(upgraded_database.app_url, timeouts=None) as database:
        assert shown(database) == ["2500ms", "30s"]


@pytest.mark.parametrize(
    ("lock_s", "statement_s", "options"),
    [
        (10, 120, "-c lock_timeout=10000ms -c statement_timeout=120000ms"),
        (0.0001, 0.25, "-c lock_timeout=1ms -c statement_timeout=250ms"),  # never 0, which means no timeout
        (1e9, 1e12, "-c lock_timeout=2147483647ms -c statement_timeout=2147483647ms"),  # Postgres's largest
    ],
)
def test_the_timeouts_are_sent_in_milliseconds_never_zero_nor_beyond_what_postgres_takes(lock_s, statement_s, options):
    assert SessionTimeouts(lock_s=lock_s, statement_s=statement_s).startup_options() == options


@pytest.mark.parametrize("variable", ["RAG_EVAL_DATABASE_LOCK_TIMEOUT_S", "RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S"])
@pytest.mark.parametrize(("value", "expected"), [("0", "must be greater than 0.0"), ("soon", "must be a number")])
def test_a_timeout_that_would_switch_the_guard_off_is_refused(variable, value, expected):
    with pytest.raises(settings.SettingsError, match=f"^{variable} {expected}, got '{value}'$"):
        settings.load({variable: value})


def test_a_held_table_lock_makes_a_write_and_a_read_fail_with_one_line(upgraded_database):
    tenant = "table-locked"
    with short_database(upgraded_database.app_url) as database:
        store = DatabaseStore(database)
        store.write(tenant, "v1", "golden_set", pd.DataFrame({"qa_id": ["q1"]}))
        with admin_transaction(upgraded_database.admin_url) as holder:
            holder.execute(text("lock table rag_eval.result_tables in access exclusive mode"))
            holder_pid = holder.execute(text("select pg_backend_pid()")).scalar_one()

            write = failure(lambda: store.write(tenant, "v1", "golden_set", pd.DataFrame({"qa_id": ["q2"]})))
            read = failure(lambda: store.read(tenant, "v1", "golden_set"))

            rolled_back = f"; tenant {tenant!r}'s transaction was rolled back"
            assert isinstance(write, DatabaseError) and _one_line(write) == LOCK_REFUSED + rolled_back
            assert isinstance(read, DatabaseError) and _one_line(read) == LOCK_REFUSED + rolled_back
            assert _holds_table_lock(upgraded_database.admin_url, holder_pid, "result_tables")
        assert store.read(tenant, "v1", "golden_set")["qa_id"].tolist() == ["q1"]  # the failed write left nothing


def test_a_runaway_statement_is_canceled_with_one_line(upgraded_database):
    def sleep(database: ResultsDatabase) -> None:
        with database.tenant("runaway") as connection:
            connection.execute(text("select pg_sleep(600)"))

    with short_database(upgraded_database.app_url, SessionTimeouts(lock_s=1, statement_s=0.2)) as database:
        canceled = failure(lambda: sleep(database))
        assert isinstance(canceled, DatabaseError) and _one_line(canceled) == (
            "a statement on the results database ran longer than 0.2 s (RAG_EVAL_DATABASE_STATEMENT_TIMEOUT_S) "
            "and was canceled; tenant 'runaway''s transaction was rolled back"
        )


@contextmanager
def held_elsewhere(enter) -> Iterator[None]:
    """Hold a lock of the stores from another thread (another session, as another process would) until the
    block ends; `enter` returns the store's context manager."""
    taken, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with enter():
                taken.set()
                release.wait(60)
        except BaseException as error:  # surfaced below, not lost in the thread
            errors.append(error)
            taken.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(30) and not errors, errors
        yield
    finally:
        release.set()
        holder.join(30)


def test_a_promotion_behind_a_held_promotion_lock_fails_with_one_line_and_promotes_nothing(upgraded_database):
    tenant = "promotion-locked"
    with short_database(upgraded_database.app_url) as database, short_database(upgraded_database.app_url) as other:
        baselines = DatabaseBaselineStore(DatabaseStore(database))
        baselines.archive(tenant, "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"))
        with held_elsewhere(lambda: DatabaseBaselineStore(DatabaseStore(other)).locked(tenant)):
            refused = failure(lambda: baselines.promote(tenant, "v1", "abc1234", EXPLICIT))
        assert isinstance(refused, DatabaseError) and _one_line(refused) == (
            f"the baseline of {tenant} stayed locked by another session for 1 s (RAG_EVAL_DATABASE_LOCK_TIMEOUT_S): "
            "nothing was promoted; try again once that session is done"
        )
        assert baselines.history(tenant) == []
        assert baselines.promote(tenant, "v1", "abc1234", EXPLICIT).commit == "abc1234"  # free again


def test_a_table_write_behind_a_held_version_lock_gives_up_within_the_lock_timeout(upgraded_database):
    tenant = "version-locked"
    with short_database(upgraded_database.app_url) as database, short_database(upgraded_database.app_url) as other:
        store = DatabaseStore(database)

        def take(version: str) -> None:
            with store.version_lock(tenant, version):
                pass

        with held_elsewhere(lambda: DatabaseStore(other).version_lock(tenant, "v1")):
            refused = failure(lambda: take("v1"))
            take("v2")  # another version's lock is another lock
        assert isinstance(refused, TimeoutError) and _one_line(refused) == (
            f"{tenant}/v1 stayed locked by another run for 1 s (RAG_EVAL_DATABASE_LOCK_TIMEOUT_S): "
            "re-run when it has finished"
        )


def test_an_upgrade_behind_another_upgrade_gives_up_within_the_lock_timeout(scratch_database_factory):
    name = scratch_database_factory()
    with admin_transaction(database_url(name)) as holder:
        holder.execute(text("select pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK})
        refused = failure(lambda: upgrade(database_url(name), timeouts=SHORT))
    assert isinstance(refused, DatabaseError) and _one_line(refused) == (
        f"cannot upgrade postgres@127.0.0.1:5432/{name} (RAG_EVAL_DATABASE_ADMIN_URL): {LOCK_REFUSED}"
    )


@pytest.mark.cli
def test_rag_eval_behind_a_held_table_lock_says_so_in_one_line_and_exits_2(
    scratch_database_factory, monkeypatch, capsys, tmp_path
):
    # A database of this test's own: the CLI keeps one ResultsDatabase per URL and process, made with the
    # timeouts of the environment it first met.
    name = scratch_database_factory()
    upgrade(database_url(name))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("RAG_EVAL_DATABASE_URL", database_url(name, user=APP_ROLE))
    monkeypatch.setenv("RAG_EVAL_DATABASE_LOCK_TIMEOUT_S", "1")
    with admin_transaction(database_url(name)) as holder:
        holder.execute(text("lock table rag_eval.baseline_history in access exclusive mode"))
        exited = failure(lambda: sys.exit(cli.main(["baseline", "show", "--tenant", "acme"])))
    assert isinstance(exited, SystemExit) and exited.code == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {LOCK_REFUSED}; tenant 'acme''s transaction was rolled back\n"
