"""The migrations: what they build (roles, schema, tables with forced row-level security), that a second
run changes nothing, that a database at 0001 moves to 0002 with its rows and its old login working, and
that the migrated tables are exactly schema.py's."""

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool, select, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.connection import open_results_database
from rag_eval_pipeline.stores.database.upgrade import alembic_config, head_revision, upgrade
from rag_eval_pipeline_tests.support.postgres import (
    APP_ROLE,
    LEGACY_APP_ROLE,
    SERVICE_ROLE,
    database_url,
    run_admin,
    sample_row,
    throwaway_role,
)

pytestmark = [pytest.mark.postgres]

TABLES = sorted(table.name for table in schema.TENANT_TABLES)


def _catalog(url: str) -> dict:
    """What the migrations decide, read from the catalogs: tables, owners, RLS flags, policies, grants."""
    queries = {
        "tables": "select c.relname, pg_get_userbyid(c.relowner), c.relrowsecurity, c.relforcerowsecurity "
        "from pg_class c join pg_namespace n on n.oid = c.relnamespace "
        "where n.nspname = 'rag_eval' and c.relkind in ('r', 'S') order by 1",
        "policies": "select tablename, policyname, permissive, roles::text, cmd, qual, with_check from pg_policies "
        "where schemaname = 'rag_eval' order by 1, 2",
        "grants": "select table_name, grantee, privilege_type from information_schema.role_table_grants "
        "where table_schema = 'rag_eval' order by 1, 2, 3",
        "indexes": "select indexname, indexdef from pg_indexes where schemaname = 'rag_eval' order by 1",
        "schema": "select nspname, pg_get_userbyid(nspowner), nspacl::text from pg_namespace where nspname = 'rag_eval'",
        "version": "select version_num from rag_eval.alembic_version",
        "roles": "select rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, "
        "rolbypassrls, rolconnlimit from pg_roles where rolname like 'rag\\_eval\\_%' "
        "and rolname not like 'rag\\_eval\\_test%' order by 1",
        "memberships": "select roleid, member from pg_auth_members m join pg_roles r on r.oid = m.member "
        "where r.rolname like 'rag\\_eval\\_%' order by 1, 2",
        # NULL (the default rights) and the same rights written out are the same rights.
        "database": "select a.grantee, a.privilege_type from pg_database d, "
        "aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a where d.datname = current_database() order by 1, 2",
        "public schema": "select nspacl::text from pg_namespace where nspname = 'public'",
        "session defaults": "select pg_get_userbyid(setrole), setconfig::text from pg_db_role_setting "
        "where setdatabase = (select oid from pg_database where datname = current_database()) order by 1",
        "sequences": "select relname, relacl::text from pg_class where relkind = 'S' "
        "and relnamespace = 'rag_eval'::regnamespace order by 1",
    }
    return {name: run_admin(sql, url) for name, sql in queries.items()}


def test_upgrade_twice_builds_once_and_changes_nothing_the_second_time(scratch_database_factory):
    url = database_url(scratch_database_factory())
    assert upgrade(url) == head_revision()
    first = _catalog(url)
    assert upgrade(url) == head_revision()
    assert _catalog(url) == first
    assert first["version"] == [(head_revision(),)]
    assert [row[0] for row in first["tables"] if row[0] not in ("alembic_version", "baseline_history_id_seq")] == TABLES


def test_the_app_role_cannot_bypass_row_level_security_and_the_owner_cannot_log_in(upgraded_database):
    roles = dict(
        (name, rest)
        for name, *rest in run_admin(
            "select rolname, rolsuper, rolbypassrls, rolcanlogin from pg_roles where rolname in (:owner, :app)",
            owner=schema.OWNER_ROLE,
            app=schema.APP_ROLE,
        )
    )
    assert roles[schema.APP_ROLE] == [False, False, True]
    assert roles[schema.OWNER_ROLE] == [False, False, False]


def test_a_database_at_0001_moves_to_0002_keeping_its_rows_and_its_old_login(scratch_database_factory):
    name = scratch_database_factory()
    url = database_url(name)
    assert upgrade(url, "0001") == "0001"
    table = schema.audited_archives
    engine = create_engine(database_url(name, user=LEGACY_APP_ROLE), poolclass=pool.NullPool)
    with engine.begin() as connection:  # the one login of 0001 writes a tenant's row
        connection.execute(text("select set_config('rag_eval.tenant', 'before', true)"))
        connection.execute(table.insert().values(sample_row(table, "before", 1)))
    engine.dispose()
    with throwaway_role("") as stranger:  # at 0001 any role of the cluster may connect (PUBLIC has CONNECT)
        run_admin("select 1", database_url(name, user=stranger))

        assert upgrade(url) == head_revision()

        with pytest.raises(OperationalError, match="permission denied for database"):
            run_admin("select 1", database_url(name, user=stranger))
    for role in (LEGACY_APP_ROLE, APP_ROLE, SERVICE_ROLE):  # the old login goes on working beside the new ones
        database = open_results_database(database_url(name, user=role))
        try:
            with database.tenant("before") as connection:
                assert connection.execute(select(table.c.tenant_id)).scalars().all() == ["before"]
        finally:
            database.dispose()
    assert run_admin(
        "select has_sequence_privilege(:app, 'rag_eval.baseline_history_id_seq', 'select')", url, app=LEGACY_APP_ROLE
    ) == [(False,)]


def test_a_database_at_0002_moves_to_0003_its_score_rows_naming_no_trace(scratch_database_factory):
    name = scratch_database_factory()
    url = database_url(name)
    assert upgrade(url, "0002") == "0002"
    run_admin(
        "insert into rag_eval.metric_scores (tenant_id, dataset_version, commit, run_id, row_no, qa_id, metric, "
        "score, status, judge, k) values ('acme', 'v1', 'c1', 'r1', 0, 'q1', 'hit_rate', 1.0, 'ok', 'j', 5)",
        url,
    )
    assert upgrade(url) == head_revision() == "0003"
    assert run_admin("select trace_id, span_id from rag_eval.metric_scores", url) == [("", "")]


def test_a_downgrade_to_0001_gives_back_what_0002_took(scratch_database_factory):
    url = database_url(scratch_database_factory())
    upgrade(url, "0001")
    at_0001 = _catalog(url)
    upgrade(url)
    assert _catalog(url) != at_0001
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0001")
    engine.dispose()
    assert _catalog(url) == at_0001


def test_every_table_is_keyed_and_indexed_by_tenant_with_row_level_security_forced(upgraded_database):
    url = upgraded_database.admin_url
    tables = run_admin(
        "select c.oid, c.relname, pg_get_userbyid(c.relowner), c.relrowsecurity, c.relforcerowsecurity "
        "from pg_class c join pg_namespace n on n.oid = c.relnamespace "
        "where n.nspname = 'rag_eval' and c.relkind = 'r' and c.relname <> 'alembic_version'",
        url,
    )
    assert sorted(row[1] for row in tables) == TABLES
    for oid, name, owner, enabled, forced in tables:
        assert (owner, enabled, forced) == (schema.OWNER_ROLE, True, True), name
        key = run_admin(
            "select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid "
            "and a.attnum = i.indkey[0] where i.indrelid = :oid and i.indisprimary",
            url,
            oid=oid,
        )
        assert key == [("tenant_id",)], name
        indexes = [
            definition
            for (definition,) in run_admin(
                "select pg_get_indexdef(indexrelid) from pg_index where indrelid = :oid", url, oid=oid
            )
        ]
        assert any(definition.endswith("USING btree (tenant_id, created_at)") for definition in indexes), name
        policies = run_admin(
            "select cmd, roles::text, qual, with_check from pg_policies "
            "where schemaname = 'rag_eval' and tablename = :name",
            url,
            name=name,
        )
        assert len(policies) == 1, name
        command_, roles, using, check = policies[0]
        assert (command_, roles) == ("ALL", "{public}"), name
        assert using == check and "current_setting('rag_eval.tenant'" in using and "NULLIF" in using, name


def test_the_migrated_tables_are_exactly_schema_py(upgraded_database):
    engine = create_engine(upgraded_database.admin_url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "include_schemas": True,
                "compare_type": True,
                "compare_server_default": True,
                "include_name": lambda name, kind, _: kind != "schema" or name == schema.SCHEMA,
                "include_object": lambda obj, name, kind, *_: not (kind == "table" and name == "alembic_version"),
            },
        )
        differences = compare_metadata(context, schema.metadata)
    engine.dispose()
    assert differences == [], "schema.py and the migrations differ: add a revision"


def test_the_app_role_may_not_switch_security_off_nor_write_the_revision(upgraded_database):
    for statement in (
        "alter table rag_eval.metric_scores disable row level security",
        "drop policy tenant_isolation on rag_eval.metric_scores",
        "update rag_eval.alembic_version set version_num = 'x'",
        "create table rag_eval.sneaky (tenant_id text)",
    ):
        with pytest.raises(ProgrammingError, match="must be owner|permission denied"):
            run_admin(statement, upgraded_database.app_url)
    assert run_admin("select version_num from rag_eval.alembic_version", upgraded_database.app_url) == [
        (head_revision(),)
    ]


def test_downgrade_to_base_then_upgrade_again(scratch_database_factory):
    url = database_url(scratch_database_factory())
    upgrade(url)
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "base")
    engine.dispose()
    assert run_admin(
        "select count(*) from pg_tables where schemaname = 'rag_eval' and tablename <> 'alembic_version'", url
    ) == [(0,)]
    assert upgrade(url) == head_revision()
    assert run_admin("select count(*) from pg_policies where schemaname = 'rag_eval'", url) == [(len(TABLES),)]
    assert run_admin("select has_schema_privilege(:app, 'rag_eval', 'usage')", url, app=APP_ROLE) == [(True,)]
