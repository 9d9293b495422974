"""Production mode's bad input at the command line: one line, exit 2, nothing written to the results."""

import shutil

import pytest

from rag_eval_pipeline.cli import main
from rag_eval_pipeline_tests.support.postgres import database_url, run_admin
from rag_eval_pipeline_tests.tenant_fixtures import REPO

pytestmark = [pytest.mark.cli, pytest.mark.postgres]


def _row_count(admin_url: str) -> int:
    return run_admin(
        "select (select count(*) from rag_eval.result_tables) + (select count(*) from "
        "rag_eval.baseline_history) + (select count(*) from rag_eval.audited_archives)",
        admin_url,
    )[0][0]


@pytest.fixture
def production_cli(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    return monkeypatch


def _one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ") and "Traceback" not in error, error
    return error


@pytest.mark.parametrize(
    "command", [["gate", "--tenant", "acme", "--candidate", "c1"], ["baseline", "show", "--tenant", "acme"]]
)
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
    sheet.write_text("qa_id,decision\nq1,accept\n", encoding="utf-8")  # an empty sheet is refused before this
    assert (
        main(["review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet), "--new-version", "v2"])
        == 2
    )
    assert "not supported yet" in _one_line_error(capsys)


@pytest.fixture
def workers_instance(production_cli, tmp_path, scratch_database_factory, upgraded_database):
    """A DAGSTER_HOME whose instance hands runs to Celery workers (deploy/celery/dagster.yaml); no worker runs."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "celery" / "dagster.yaml", home / "dagster.yaml")
    production_cli.setenv("DAGSTER_PG_URL", f"postgresql://postgres@127.0.0.1:5432/{scratch_database_factory()}")
    production_cli.setenv("RAG_EVAL_CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    production_cli.setenv("RAG_EVAL_CELERY_BACKEND_URL", "redis://127.0.0.1:6379/0")
    production_cli.setenv("RAG_EVAL_DATABASE_URL", upgraded_database.app_url)
    assert main(["register", "--tenant", "acme", "--version", "v1"]) == 0
    return production_cli


@pytest.mark.parametrize(
    "variables, candidate, expected",
    [
        ({}, [], "RAG_EVAL_OBJECT_STORE_URL and RAG_EVAL_CACHE_URL are not set"),
        (
            {
                "RAG_EVAL_OBJECT_STORE_URL": "s3://b/p",
                "RAG_EVAL_OBJECT_STORE_ENDPOINT": "http://127.0.0.1:1",
                "RAG_EVAL_CACHE_URL": "redis://127.0.0.1:6379/14",
            },
            ["--candidate", "my_rag:answer"],
            "would run the code installed on the shared workers",
        ),
    ],
)
def test_a_run_for_the_workers_is_refused_before_it_is_queued(workers_instance, capsys, variables, candidate, expected):
    """Shared storage missing, or code that the workers would run from their own installation: one line,
    and no run is queued."""
    for variable, value in variables.items():
        workers_instance.setenv(variable, value)
    capsys.readouterr()
    assert main(["run", "--tenant", "acme", "--version", "v1", *candidate]) == 2
    assert expected in _one_line_error(capsys)


def test_a_run_no_worker_takes_is_canceled_when_the_wait_times_out(workers_instance, capsys, tmp_path):
    """No daemon, no worker: the run stays queued; rag-eval gives up after RAG_EVAL_RUN_TIMEOUT_S and cancels it,
    so it never runs (and promotes) later when nobody waits for it."""
    from dagster import DagsterInstance, DagsterRunStatus

    for variable, value in {
        "RAG_EVAL_OBJECT_STORE_URL": "s3://b/p",
        "RAG_EVAL_OBJECT_STORE_ENDPOINT": "http://h:1",
        "RAG_EVAL_CACHE_URL": "redis://127.0.0.1:6379/14",
        "RAG_EVAL_RUN_TIMEOUT_S": "2",
    }.items():
        workers_instance.setenv(variable, value)
    capsys.readouterr()
    assert main(["run", "--tenant", "acme", "--version", "v1"]) == 2
    queued, error = capsys.readouterr().err.splitlines()
    assert "queued for a worker on rag-eval-small" in queued
    assert "did not finish within 2 s" in error and "canceled" in error
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        (run,) = instance.get_runs()
        assert run.status == DagsterRunStatus.CANCELED and run.tags["dagster-celery/queue"] == "rag-eval-small"


@pytest.mark.dagster
def test_a_worker_without_the_results_database_refuses_a_production_run(tmp_path):
    """A worker whose environment lacks RAG_EVAL_DATABASE_URL would keep the run's results on its own disk."""
    import pandas as pd
    from dagster import asset, materialize

    from rag_eval_pipeline.core.names import RESULTS_IN_DATABASE, RESULTS_TAG
    from rag_eval_pipeline.resources.warehouse import WarehouseIOManager

    @asset
    def table() -> pd.DataFrame:
        return pd.DataFrame({"a": [1]})

    resources = {"io_manager": WarehouseIOManager(root=str(tmp_path / "warehouse"))}
    refused = materialize([table], resources=resources, tags={RESULTS_TAG: RESULTS_IN_DATABASE}, raise_on_error=False)
    assert not refused.success and not (tmp_path / "warehouse").exists()
    assert any("has no RAG_EVAL_DATABASE_URL" in str(event.event_specific_data) for event in refused.all_events)
