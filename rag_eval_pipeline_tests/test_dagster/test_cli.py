"""`rag-eval` as a user runs it: in a subprocess, with every location moved into a temporary folder (the
bad names in the test's process, see support/cli.py)."""

from pathlib import Path

import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process

pytestmark = [pytest.mark.dagster, pytest.mark.cli]


@pytest.fixture
def env(cli_env):
    return cli_env


def test_register_then_run_the_whole_lineage(env, tmp_path):
    assert rag_eval_process(env, "register", "--tenant", "acme", "--version", "v1").returncode == 0
    # The repo's dagster.yaml (run-queue limits) was installed into the new DAGSTER_HOME.
    assert "dagster/partition/tenant" in (tmp_path / "home" / "dagster.yaml").read_text()

    completed = rag_eval_process(env, "run", "--tenant", "acme", "--version", "v1", "--commit", "abc123")
    assert completed.returncode == 0, completed.stderr
    assert "Regression report: acme / v1" in completed.stdout
    assert "candidate commit: abc123" in completed.stdout
    audits = Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1" / "audits" / "commit=abc123"
    assert [report.parent.parent for report in audits.glob("run=*/regression_report.md")] == [audits]


@pytest.mark.parametrize(
    "args, message",
    [
        (("run", "--tenant", "ghost", "--version", "v1"), "unknown tenant 'ghost'"),
        (("register", "--tenant", "Bad Name", "--version", "v1"), "invalid tenant name 'Bad Name'"),
        (("register", "--tenant", "acme", "--version", "v" * 64), "invalid dataset version name"),
    ],
)
def test_bad_names_are_clear_errors(env, args, message):
    completed = rag_eval(env, *args)
    assert completed.returncode == 2
    assert message in completed.stderr
