"""Production mode's bad input at the command line: one line, exit 2, nothing written to the results."""

import pytest

from rag_eval_pipeline.cli import main
from rag_eval_pipeline_tests.support.postgres import database_url, run_admin

pytestmark = [pytest.mark.cli, pytest.mark.postgres]


def _row_count(admin_url: str) -> int:
    return run_admin("select (select count(*) from rag_eval.result_tables) + (select count(*) from "
                     "rag_eval.baseline_history) + (select count(*) from rag_eval.audited_archives)", admin_url)[0][0]


@pytest.fixture
def production_cli(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    return monkeypatch


def _one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ") and "Traceback" not in error, error
    return error


@pytest.mark.parametrize("command", [["gate", "--tenant", "acme", "--candidate", "c1"],
                                     ["baseline", "show", "--tenant", "acme"]])
def test_a_superuser_given_to_the_pipeline_is_refused(production_cli, capsys, upgraded_database, command):
    production_cli.setenv("RAG_EVAL_DATABASE_URL", upgraded_database.admin_url)
    before = _row_count(upgraded_database.admin_url)
    assert main(command) == 2
    assert "refusing to run as postgres: it would see every tenant's rows" in _one_line_error(capsys)
    assert _row_count(upgraded_database.admin_url) == before


def test_an_unreachable_database_is_one_line(production_cli, capsys):
    production_cli.setenv("RAG_EVAL_DATABASE_URL", "postgresql://rag_eval_app:s3cret@127.0.0.1:1/rag_eval")
    assert main(["baseline", "show", "--tenant", "acme"]) == 2
    error = _one_line_error(capsys)
    assert "cannot connect" in error and "RAG_EVAL_DATABASE_URL" in error and "s3cret" not in error


def test_a_database_older_than_the_code_says_to_upgrade(production_cli, capsys, scratch_database_factory):
    production_cli.setenv("RAG_EVAL_DATABASE_URL", database_url(scratch_database_factory(), user="rag_eval_app"))
    assert main(["gate", "--tenant", "acme", "--candidate", "c1"]) == 2
    assert "rag-eval db upgrade" in _one_line_error(capsys)


def test_a_password_is_never_shown_even_when_misplaced(production_cli, capsys):
    production_cli.setenv("RAG_EVAL_DATABASE_URL", "postgresql://rag_eval_app@127.0.0.1:1/db?password=TopSecret1")
    assert main(["baseline", "show", "--tenant", "acme"]) == 2
    assert "TopSecret1" not in _one_line_error(capsys)
    production_cli.setenv("RAG_EVAL_DATABASE_URL", "postgresql://rag_eval_app:Pa@ssw0rd@127.0.0.1:1/db")
    assert main(["baseline", "show", "--tenant", "acme"]) == 2
    assert "ssw0rd" not in _one_line_error(capsys)


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-0.1", "1.5"])
def test_a_tolerance_that_would_pass_everything_or_nothing_is_refused(production_cli, capsys, tolerance):
    assert main(["gate", "--tenant", "acme", "--candidate", "c1", "--tolerance", tolerance]) == 2
    assert "--tolerance" in _one_line_error(capsys)


def test_review_import_says_it_is_not_supported_in_production_mode(production_cli, capsys, tmp_path, upgraded_database):
    production_cli.setenv("RAG_EVAL_DATABASE_URL", upgraded_database.app_url)
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("qa_id,decision\n", encoding="utf-8")
    assert main(["review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet),
                 "--new-version", "v2"]) == 2
    assert "not supported yet" in _one_line_error(capsys)
