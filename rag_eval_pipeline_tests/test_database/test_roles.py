"""The login roles `rag-eval db upgrade` creates, exactly as docs/production.md lists them: separate, so
one never reads the other's statements nor ends its sessions; the only roles let into the database;
with their session defaults; unable to read the sequences or to use schema public."""

import itertools
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Connection, create_engine, pool, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.upgrade import upgrade
from rag_eval_pipeline_tests.support.postgres import (
    LEGACY_APP_ROLE,
    SERVICE_ROLE,
    WORKER_ROLE,
    database_url,
    run_admin,
    throwaway_role,
)

pytestmark = [pytest.mark.postgres]

LOGINS = (SERVICE_ROLE, WORKER_ROLE, LEGACY_APP_ROLE)
HIDDEN = "<insufficient privilege>"
INSUFFICIENT_PRIVILEGE = "42501"  # SQLSTATE; the message's wording changed in Postgres 16
# rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit
LOGIN_ATTRIBUTES = (False, True, False, False, True, False, False, -1)
DOCUMENTED_ROLES = {
    schema.OWNER_ROLE: (False, True, False, False, False, False, False, -1),
    SERVICE_ROLE: LOGIN_ATTRIBUTES,
    WORKER_ROLE: LOGIN_ATTRIBUTES,
    LEGACY_APP_ROLE: LOGIN_ATTRIBUTES,
}
SESSION_DEFAULTS = "{lock_timeout=10s,statement_timeout=120s,idle_in_transaction_session_timeout=15min}"
TABLE_RIGHTS = ["DELETE", "INSERT", "SELECT", "UPDATE"]


@contextmanager
def session(url: str) -> Iterator[Connection]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def _pid(connection: Connection) -> int:
    return connection.execute(text("select pg_backend_pid()")).scalar_one()


@pytest.mark.parametrize(("looker", "target"), list(itertools.permutations(LOGINS, 2)))
def test_a_login_sees_no_statement_of_another_login_and_may_not_end_its_session(upgraded_database, looker, target):
    marker = f"tenant acme, secret {uuid.uuid4().hex}"
    name = upgraded_database.name
    with session(database_url(name, user=target)) as watched, session(database_url(name, user=looker)) as watcher:
        watched.execute(text("select :marker"), {"marker": marker})  # a statement with its values, then idle
        watched.commit()
        pid = _pid(watched)
        seen = "select usename, query from pg_stat_activity where pid = :pid"
        assert run_admin(seen, upgraded_database.admin_url, pid=pid)[0][1] != HIDDEN  # there to be seen
        assert watcher.execute(text(seen), {"pid": pid}).one() == (target, HIDDEN)
        with pytest.raises(ProgrammingError) as refused:
            watcher.execute(text("select pg_terminate_backend(:pid)"), {"pid": pid})
        reason = refused.value.orig
        assert getattr(reason, "pgcode", None) == INSUFFICIENT_PRIVILEGE and "terminate" in str(reason)
        watcher.rollback()
        assert watched.execute(text("select 1")).scalar() == 1  # still there


def test_the_roles_have_exactly_the_documented_attributes_and_no_memberships(upgraded_database):
    roles = run_admin(
        "select rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, "
        "rolbypassrls, rolconnlimit from pg_roles where rolname = any(:names)",
        names=list(DOCUMENTED_ROLES),
    )
    assert {name: tuple(rest) for name, *rest in roles} == DOCUMENTED_ROLES
    assert run_admin(
        "select count(*) from pg_auth_members where member in (select oid from pg_roles where rolname = any(:names))",
        names=list(LOGINS),
    ) == [(0,)]


def test_only_the_logins_may_connect_and_public_has_no_right_on_the_database_nor_on_schema_public(
    upgraded_database,
):
    url = upgraded_database.admin_url
    assert run_admin(
        "select has_database_privilege('public', current_database(), 'connect'), "
        "has_database_privilege('public', current_database(), 'temporary'), "
        "has_schema_privilege('public', 'public', 'usage'), has_schema_privilege('public', 'public', 'create')",
        url,
    ) == [(False, False, False, False)]
    rights = run_admin(
        "select grantee::regrole::text, privilege_type from pg_database d, aclexplode(d.datacl) "
        "where d.datname = current_database() and grantee <> d.datdba order by 1, 2",
        url,
    )
    assert rights == sorted((role, "CONNECT") for role in LOGINS)
    with throwaway_role("") as stranger:  # a role of the same cluster
        with pytest.raises(OperationalError, match=f'permission denied for database "{upgraded_database.name}"'):
            with session(database_url(upgraded_database.name, user=stranger)):
                pass


def test_each_login_may_use_the_tenant_tables_rows_read_the_revision_and_nothing_else(upgraded_database):
    grants = run_admin(
        "select table_name, grantee, privilege_type from information_schema.role_table_grants "
        "where table_schema = 'rag_eval' and grantee = any(:names) order by 1, 2, 3",
        upgraded_database.admin_url,
        names=list(LOGINS),
    )
    tables = sorted(table.name for table in schema.TENANT_TABLES)
    expected = [(table, role, right) for table in tables for role in sorted(LOGINS) for right in TABLE_RIGHTS]
    expected += [("alembic_version", role, "SELECT") for role in sorted(LOGINS)]
    assert sorted(grants) == sorted(expected)


@pytest.mark.parametrize("role", LOGINS)
def test_a_login_may_not_read_the_sequences_yet_promotions_still_number_themselves(upgraded_database, role):
    with session(database_url(upgraded_database.name, user=role)) as connection:
        with pytest.raises(ProgrammingError, match="permission denied for sequence"):
            connection.execute(text("select last_value from rag_eval.baseline_history_id_seq"))
        connection.rollback()
        assert connection.execute(text("select last_value from pg_sequences")).scalars().all() == [None]
        tenant = f"seq-{role}"
        connection.execute(text("select set_config('rag_eval.tenant', :tenant, true)"), {"tenant": tenant})
        connection.execute(
            text(
                "insert into rag_eval.baseline_history (tenant_id, dataset_version, commit, reason) "
                "values (:tenant, 'v1', 'c1', 'test')"
            ),
            {"tenant": tenant},
        )
        connection.rollback()


def test_each_login_has_its_session_defaults_on_this_database_only(upgraded_database, scratch_database_factory):
    defaults = (
        "select pg_get_userbyid(setrole), setconfig::text from pg_db_role_setting "
        "where setdatabase = {} and pg_get_userbyid(setrole) = any(:logins)"
    )
    this = run_admin(
        defaults.format("(select oid from pg_database where datname = current_database())"),
        upgraded_database.admin_url,
        logins=list(LOGINS),
    )
    assert sorted(this) == [(role, SESSION_DEFAULTS) for role in sorted(LOGINS)]
    assert run_admin(defaults.format(0), logins=list(LOGINS)) == []  # nothing for the whole cluster
    with session(database_url(upgraded_database.name, user=WORKER_ROLE)) as psql_like:  # sets nothing itself
        assert [psql_like.execute(text(f"show {name}")).scalar() for name in ("lock_timeout", "statement_timeout")] == [
            "10s",
            "2min",
        ]
    elsewhere = scratch_database_factory()  # another database of the cluster: no defaults there
    with session(database_url(elsewhere, user=WORKER_ROLE)) as connection:
        assert connection.execute(text("show lock_timeout")).scalar() == "0"


def test_an_upgrade_revokes_a_membership_that_would_let_a_login_see_or_end_others(private_server):
    """On a cluster of its own: the grants below would reach every test session of the shared one."""
    for name in ("members_first", "members_second"):
        run_admin(f"create database {name}", private_server.url())
    upgrade(private_server.url("members_first"))  # the roles exist from here on
    grants = [
        ("pg_read_all_stats", SERVICE_ROLE),
        ("pg_signal_backend", WORKER_ROLE),
        (WORKER_ROLE, SERVICE_ROLE),
        (schema.OWNER_ROLE, LEGACY_APP_ROLE),
    ]
    for granted, member in grants:
        run_admin(f"grant {granted} to {member}", private_server.url())
    members = (
        "select pg_get_userbyid(roleid), pg_get_userbyid(member) from pg_auth_members "
        "where pg_get_userbyid(member) like 'rag_eval%' order by 1, 2"
    )
    assert run_admin(members, private_server.url()) == sorted(grants)

    upgrade(private_server.url("members_second"))

    assert run_admin(members, private_server.url()) == []
