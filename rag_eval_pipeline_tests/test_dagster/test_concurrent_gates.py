"""Many `rag-eval gate` processes at once, on one tenant and on several: each gets its own verdict (and a
first gate measured on no item, in the test's process, never becomes the baseline).

Before the audit tables were keyed by commit and run, two gates of one tenant started together
overwrote each other's tables: a candidate that declines every question passed with the reference
candidate's report, and the reference was promoted twice.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.reporting.baselines import FIRST_RUN
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.local_baselines import LocalBaselineStore
from rag_eval_pipeline_tests.support.cli import RAG_EVAL, rag_eval
from rag_eval_pipeline_tests.tenant_fixtures import synthesize
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

EMPTY = "rag_eval_pipeline_tests.candidates:i_do_not_know"
DEGRADED = "rag_eval_pipeline_tests.candidates:no_retrieval"


def _start(env, *args) -> subprocess.Popen:
    return subprocess.Popen([RAG_EVAL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=600)
    return process.returncode, out, err


@pytest.fixture
def two_tenants(synthesized_cli_env, tenant_dirs):
    """acme and globex (the same documents), synthesized (acme: a copy of the session's; globex here, in
    process), each with the reference as its baseline."""
    cli_env = synthesized_cli_env
    documents_root, warehouse_root = tenant_dirs
    shutil.copytree(documents_root / "acme", documents_root / "globex")
    with cli_instance(cli_env) as instance:
        synthesize(instance, documents_root, warehouse_root, "globex")
    for tenant in ("acme", "globex"):  # one after the other, in this process (see support/cli.py)
        first = rag_eval(cli_env, "gate", "--tenant", tenant, "--candidate", "base", "--branch", "main")
        assert first.returncode == 0 and "NO BASELINE YET" in first.stdout, first.stderr
    return cli_env


def _report_of(stdout: str) -> pd.DataFrame:
    """The report table beside the Markdown report the gate printed."""
    (line,) = [line for line in stdout.splitlines() if line.startswith("report: ")]
    return pd.read_parquet(Path(line.removeprefix("report: ")).with_name("regression_report.parquet"))


def test_concurrent_gates_each_get_their_own_verdict_and_promotions_are_not_lost(two_tenants, tenant_dirs):
    gates = {  # (tenant, commit): (entry or None, expected exit code)
        ("acme", "good-1"): (None, 0),
        ("acme", "empty"): (EMPTY, 1),
        ("acme", "degraded"): (DEGRADED, 1),
        ("acme", "good-2"): (None, 0),
        ("globex", "degraded"): (DEGRADED, 1),
        ("globex", "good-1"): (None, 0),
    }
    processes = {
        (tenant, commit): _start(
            two_tenants,
            "gate",
            "--tenant",
            tenant,
            "--candidate",
            commit,
            "--branch",
            "main",
            *(("--entry", entry) if entry else ()),
        )
        for (tenant, commit), (entry, _) in gates.items()
    }
    finished = {gate: _finish(process) for gate, process in processes.items()}

    for (tenant, commit), (code, out, err) in finished.items():
        expected = gates[(tenant, commit)][1]
        assert code == expected, f"{tenant}/{commit}: exit {code}\n{out}\n{err}"
        assert f"for commit {commit} on {tenant}/v1" in out
        report = _report_of(out)
        assert set(report["commit"]) == {commit}  # its own report, not a neighbour's
        assert (report["verdict_overall"].iloc[0] == "block") is (expected == 1)
        assert f"/{tenant}/v1/audits/commit={commit}/run=" in out

    store = LocalBaselineStore(Warehouse(tenant_dirs[1]))
    for tenant in ("acme", "globex"):
        commits = {commit for (t, commit) in gates if t == tenant} | {"base"}
        assert set(store.audited_commits(tenant, "v1")) == commits  # every audit archived under its own commit
        for commit in commits:
            scores, outputs = store.audited(tenant, "v1", commit)
            assert set(scores["commit"]) == {commit} and set(outputs["commit"]) == {commit}
    # Each passing gate on main promoted exactly once, the blocked ones never; the first run's base stays first.
    acme = [p.commit for p in store.history("acme", "v1")]
    assert acme[0] == "base" and sorted(acme[1:]) == ["good-1", "good-2"]
    assert [p.commit for p in store.history("globex", "v1")] == ["base", "good-1"]
    lines = (Path(tenant_dirs[1]) / "acme" / "baseline_history.jsonl").read_text().splitlines()
    assert all(json.loads(line)["tenant"] == "acme" for line in lines)


def test_two_first_gates_at_once_propose_one_baseline(synthesized_cli_env):
    """No baseline yet and two candidates at once on main: exactly one becomes the proposed baseline, the other
    is compared with it (whichever finished first)."""
    cli_env = synthesized_cli_env
    commits = ["ref-a", "ref-b"]
    first = [
        _start(cli_env, "gate", "--tenant", "acme", "--candidate", commit, "--branch", "main") for commit in commits
    ]
    outcomes = dict(zip(commits, (_finish(p) for p in first)))
    store = LocalBaselineStore(Warehouse(cli_env["RAG_EVAL_WAREHOUSE"]))
    history = store.history("acme", "v1")
    proposed = [p.commit for p in history if p.reason == FIRST_RUN]
    assert len(proposed) == 1, [(p.commit, p.reason) for p in history]
    winner = proposed[0]
    (loser,) = set(commits) - {winner}
    code, loser_out, err = outcomes[loser]
    assert code == 0, err
    assert "NO BASELINE YET" not in loser_out and f"baseline: {winner}" in loser_out
    assert "NO BASELINE YET" in outcomes[winner][1]
    # The other, compared with it, passed on main: it may then replace it, as any pass on main does.
    assert [p.commit for p in history] in ([winner], [winner, loser])


def test_a_first_gate_whose_candidate_fails_every_item_on_main_never_becomes_the_baseline(synthesized_cli_env):
    """It was measured on no item, so it is nothing later candidates could be compared with: exit 2, no history."""
    gate = rag_eval(
        synthesized_cli_env,
        "gate",
        "--tenant",
        "acme",
        "--candidate",
        "broken",
        "--entry",
        "rag_eval_pipeline_tests.candidates:crashes",
        "--branch",
        "main",
    )
    code, out = gate.returncode, gate.stdout
    assert code == 2, out + gate.stderr
    assert "unmeasured faithfulness: candidate measured on 0 of " in out and "vector store connection refused" in out
    assert "now the baseline" not in out
    assert LocalBaselineStore(Warehouse(synthesized_cli_env["RAG_EVAL_WAREHOUSE"])).history("acme") == []
