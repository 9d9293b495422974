"""What the results database refuses, each in one line that says what to fix: a bad URL, a server or
database that is not there, a role that would bypass row-level security, a schema not at the head;
and `rag-eval db upgrade`'s own errors and output."""

import pytest

from rag_eval_pipeline import cli
from rag_eval_pipeline.stores.database.connection import DatabaseError, ResultsDatabase, open_results_database
from rag_eval_pipeline.stores.database.upgrade import head_revision, upgrade
from rag_eval_pipeline_tests.support.postgres import (
    APP_ROLE,
    database_url,
    free_port,
    run_admin,
    throwaway_role,
)

pytestmark = [pytest.mark.postgres]

SECRET = "s3cret-Pa55"
UPGRADE_HINT = "run `rag-eval db upgrade`"
CONNECT_AS = "connect as rag_eval_worker (or rag_eval_service, the gate service)"


def _refusal(url: str) -> str:
    with pytest.raises(DatabaseError) as raised:
        open_results_database(url)
    message = str(raised.value)
    assert "\n" not in message and SECRET not in message
    return message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", "RAG_EVAL_DATABASE_URL is not set"),
        ("   ", "RAG_EVAL_DATABASE_URL is not set"),
        (f"postgresql://app:{SECRET}@host:port/db", "RAG_EVAL_DATABASE_URL is not a valid URL"),
        ("not a url at all", "RAG_EVAL_DATABASE_URL is not a valid URL"),
        (f"mysql://app:{SECRET}@127.0.0.1/results", "RAG_EVAL_DATABASE_URL must be a postgresql:// URL, got mysql://"),
        ("postgresql://app@127.0.0.1:5432", "RAG_EVAL_DATABASE_URL names no database"),
    ],
)
def test_a_malformed_url_is_refused_without_connecting(url, expected):
    with pytest.raises(DatabaseError) as raised:
        ResultsDatabase(url)
    message = str(raised.value)
    assert message.startswith(expected) and SECRET not in message and "\n" not in message


def test_an_unreachable_server_names_the_variable_and_hides_the_password():
    port = free_port()  # nothing listens there
    message = _refusal(database_url("results", user=APP_ROLE, port=port, password=SECRET))
    assert message.startswith(f"cannot connect to {APP_ROLE}@127.0.0.1:{port}/results (RAG_EVAL_DATABASE_URL): ")
    assert "refused" in message


def test_a_missing_database_says_to_create_it(upgraded_database):
    message = _refusal(database_url("rag_eval_no_such_database", user=APP_ROLE, password=SECRET))
    assert message == (
        "the database 'rag_eval_no_such_database' does not exist on 127.0.0.1:5432 "
        f"(RAG_EVAL_DATABASE_URL): create it, then {UPGRADE_HINT}"
    )


def test_a_superuser_is_refused(upgraded_database):
    assert (
        _refusal(upgraded_database.admin_url)
        == f"refusing to run as postgres: it would see every tenant's rows; {CONNECT_AS}"
    )


def test_a_role_with_bypassrls_is_refused(upgraded_database):
    with throwaway_role("BYPASSRLS", may_connect_to=upgraded_database.name) as role:
        assert (
            _refusal(database_url(upgraded_database.name, user=role))
            == f"refusing to run as {role}: it would see every tenant's rows; {CONNECT_AS}"
        )


def test_a_database_never_upgraded_is_refused_and_left_as_it_was(upgraded_database, scratch_database_factory):
    name = scratch_database_factory()  # the roles exist (the session's upgrade made them); this database has no schema
    message = _refusal(database_url(name, user=APP_ROLE))
    assert message.startswith(f"the results database '{name}' has no rag_eval schema") and message.endswith(
        UPGRADE_HINT
    )
    assert run_admin("select count(*) from pg_namespace where nspname = 'rag_eval'", database_url(name)) == [(0,)]


def test_a_database_at_another_revision_is_refused_and_an_unknown_one_not_upgraded(
    upgraded_database, scratch_database_factory
):
    name = scratch_database_factory()
    admin_url = database_url(name)
    upgrade(admin_url)
    run_admin("update rag_eval.alembic_version set version_num = 'ffff'", admin_url)
    assert (
        _refusal(database_url(name, user=APP_ROLE))
        == f"the results database '{name}' is at revision ffff, this code needs {head_revision()}: {UPGRADE_HINT}"
    )
    with pytest.raises(DatabaseError, match="is at revision ffff, which this code does not know"):
        upgrade(admin_url)


def test_an_upgrade_as_a_role_that_is_not_a_superuser_is_refused_and_leaves_nothing(
    upgraded_database, scratch_database_factory
):
    name = scratch_database_factory()
    with pytest.raises(DatabaseError) as raised:
        upgrade(database_url(name, user=APP_ROLE))
    message = str(raised.value)
    assert message.startswith(
        f"cannot upgrade {APP_ROLE}@127.0.0.1:5432/{name} (RAG_EVAL_DATABASE_ADMIN_URL): permission denied"
    )
    assert message.endswith("RAG_EVAL_DATABASE_ADMIN_URL must name a superuser") and "\n" not in message
    assert run_admin("select count(*) from pg_namespace where nspname = 'rag_eval'", database_url(name)) == [(0,)]


@pytest.mark.cli
def test_db_upgrade_without_its_variable_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.delenv("RAG_EVAL_DATABASE_ADMIN_URL", raising=False)
    assert cli.main(["db", "upgrade"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: RAG_EVAL_DATABASE_ADMIN_URL is not set") and captured.err.count("\n") == 1


@pytest.mark.cli
def test_db_upgrade_with_an_unreachable_server_is_one_line_and_exit_2(monkeypatch, capsys):
    port = free_port()
    monkeypatch.setenv("RAG_EVAL_DATABASE_ADMIN_URL", database_url("results", port=port, password=SECRET))
    assert cli.main(["db", "upgrade"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot connect to postgres@127.0.0.1:{port}/results (RAG_EVAL_DATABASE_ADMIN_URL)")
    assert err.count("\n") == 1 and SECRET not in err


@pytest.mark.cli
def test_db_upgrade_prints_the_revision_and_the_app_role_may_then_connect(
    monkeypatch, capsys, scratch_database_factory
):
    name = scratch_database_factory()
    monkeypatch.setenv("RAG_EVAL_DATABASE_ADMIN_URL", database_url(name))
    assert cli.main(["db", "upgrade"]) == 0
    assert capsys.readouterr().out == f"{head_revision()}\n"
    open_results_database(database_url(name, user=APP_ROLE)).dispose()
