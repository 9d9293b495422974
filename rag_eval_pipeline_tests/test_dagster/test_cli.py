"""`rag-eval` as a user runs it: in a subprocess, with every location moved into a temporary folder."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")


@pytest.fixture
def env(cli_env):
    return cli_env


def _cli(env, *args):
    return subprocess.run([RAG_EVAL, *args], env=env, capture_output=True, text=True, timeout=300)


def test_register_then_run_the_whole_lineage(env, tmp_path):
    assert _cli(env, "register", "--tenant", "acme", "--version", "v1").returncode == 0
    # The repo's dagster.yaml (run-queue limits) was installed into the new DAGSTER_HOME.
    assert "dagster/partition/tenant" in (tmp_path / "home" / "dagster.yaml").read_text()

    completed = _cli(env, "run", "--tenant", "acme", "--version", "v1", "--commit", "abc123")
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
    completed = _cli(env, *args)
    assert completed.returncode == 2
    assert message in completed.stderr
