"""On a private Postgres (a cluster of its own, from initdb): the first upgrades of a cluster racing to
create the roles, and a ResultsDatabase that outlives a server restart without half-written rows."""

import os
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, func, insert, pool, select, text

from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.connection import DatabaseError, open_results_database
from rag_eval_pipeline.stores.database.upgrade import head_revision, upgrade
from rag_eval_pipeline_tests.support.postgres import APP_ROLE, run_admin, sample_row

pytestmark = [pytest.mark.postgres]

TABLE = schema.metric_scores
UPGRADE = "import sys; from rag_eval_pipeline.stores.database.upgrade import upgrade; print(upgrade(sys.argv[1]))"


def test_first_upgrades_of_one_cluster_racing_to_create_the_roles_all_succeed(fresh_private_server):
    private_server = fresh_private_server
    names = ["first_a", "first_b"]
    for name in names:
        run_admin(f"create database {name}", private_server.url())
    assert run_admin("select count(*) from pg_roles where rolname like 'rag_eval%'", private_server.url()) == [(0,)]
    # A third party is creating the roles (those of 0001 and of 0002) and has not committed: both
    # upgrades must wait for it, then find the roles taken (a duplicate) and carry on.
    engine = create_engine(private_server.url(), poolclass=pool.NullPool)
    with engine.connect() as rival:
        for role in (schema.OWNER_ROLE, *schema.LOGIN_ROLES):
            rival.execute(text(f"create role {role} {'nologin' if role == schema.OWNER_ROLE else 'login'}"))
        # Two processes, as two test sessions or two deploy jobs would be; the wait for the rival is long
        # on a loaded machine, so the upgrades' lock timeout is raised.
        environment = {**os.environ, "RAG_EVAL_DATABASE_LOCK_TIMEOUT_S": "120"}
        upgrades = [
            subprocess.Popen(
                [sys.executable, "-c", UPGRADE, private_server.url(name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment,
            )
            for name in names
        ]
        _wait_until_blocked(private_server, len(names))
        rival.commit()
    engine.dispose()
    outcomes = [process.communicate(timeout=120) for process in upgrades]
    assert [(process.returncode, out.strip()) for process, (out, _) in zip(upgrades, outcomes)] == [
        (0, head_revision())
    ] * len(names), [err for _, err in outcomes]
    assert sorted(run_admin("select rolname from pg_roles where rolname like 'rag_eval%'", private_server.url())) == [
        (role,) for role in sorted((schema.OWNER_ROLE, *schema.LOGIN_ROLES))
    ]


def _wait_until_blocked(server, sessions: int, timeout_s: float = 60) -> None:
    """Poll until `sessions` backends wait on a lock (the upgrades, behind the rival's roles)."""
    deadline = time.monotonic() + timeout_s
    while (
        run_admin(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
            "and application_name = 'rag_eval_pipeline'",
            server.url(),
        )[0][0]
        < sessions
    ):
        assert time.monotonic() < deadline, "the upgrades never reached the roles"
        time.sleep(0.05)


def _count(server, tenant: str) -> int:
    return run_admin(
        f"select count(*) from {schema.SCHEMA}.{TABLE.name} where tenant_id = :tenant",
        server.url("restarts"),
        tenant=tenant,
    )[0][0]


def _write(database, tenant: str, *keys: int) -> None:
    with database.tenant(tenant) as connection:
        for key in keys:
            connection.execute(insert(TABLE).values(sample_row(TABLE, tenant, key)))


def test_the_same_database_object_works_across_a_restart_and_a_write_to_a_stopped_server_leaves_nothing(private_server):
    run_admin("create database restarts", private_server.url())
    upgrade(private_server.url("restarts"))
    database = open_results_database(private_server.url("restarts", user=APP_ROLE), pool_size=1, max_overflow=0)
    try:
        _write(database, "acme", 1)
        private_server.restart()  # the pooled connection is now dead; the pool's ping replaces it
        _write(database, "acme", 2)
        assert _count(private_server, "acme") == 2

        private_server.stop()
        with pytest.raises(DatabaseError, match=r"^cannot connect to .*\(RAG_EVAL_DATABASE_URL\)"):
            _write(database, "acme", 3)
        private_server.start()
        assert _count(private_server, "acme") == 2

        # The server goes away inside the transaction, after two of three rows: none of them is kept.
        with pytest.raises(DatabaseError, match="during tenant 'acme'.s transaction, which was not committed"):
            with database.tenant("acme") as connection:
                for key in (4, 5):
                    connection.execute(insert(TABLE).values(sample_row(TABLE, "acme", key)))
                private_server.stop()
                connection.execute(insert(TABLE).values(sample_row(TABLE, "acme", 6)))
        private_server.start()
        assert _count(private_server, "acme") == 2
        with database.tenant("acme") as connection:
            assert connection.execute(select(func.count()).select_from(TABLE)).scalar() == 2
    finally:
        if not private_server.running():
            private_server.start()
        database.dispose()
