"""No PASS without a measurement: `rag-eval gate` as CI runs it, against faults that used to pass quietly.

Each case was reproduced on the commit before this change (d3fcc95) with the same commands:
- an LLM judge whose every reply is invalid JSON (the scripted FakeOpenAIServer, named as a fake): against
  an offline-scored baseline the gate exited 0 and promoted on main; against an LLM-scored one it exited 1;
- a candidate that calls os._exit(0): the gate exited 0 with nothing printed;
- `--baseline <a blocked commit> --branch main` promoted the candidate; a first gate from a pull request's
  branch became the baseline;
- a report that could not be written after the promotion left the promotion in place.

The gates run in this process (see support/cli.py), but for the candidate that ends its process: that
gate runs as CI runs it, in a subprocess of its own, as does the refused promotion whose stderr must be
one line.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
from rag_eval_pipeline.core.llm.client import LLMSettings
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.local_baselines import LocalBaselineStore
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply
from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

CANDIDATES = "rag_eval_pipeline_tests.candidates"
DEGRADED = f"{CANDIDATES}:no_retrieval"
INVALID_JSON = Reply(200, "Sure! Here is my verdict: the statements are supported.")
FAKE_MODEL = "fake-judge"


def _gate(env, commit: str, *args, run=rag_eval):
    return run(env, "gate", "--tenant", "acme", "--candidate", commit, *args)


def _history(env) -> list[str]:
    return [p.commit for p in LocalBaselineStore(Warehouse(env["RAG_EVAL_WAREHOUSE"])).history("acme", "v1")]


def _broken_judge_env(env, server: FakeOpenAIServer) -> dict:
    return {
        **env,
        "RAG_EVAL_JUDGE": "llm",
        "RAG_EVAL_JUDGE_BASE_URL": server.base_url,
        "RAG_EVAL_JUDGE_MODEL": FAKE_MODEL,
        "RAG_EVAL_JUDGE_MAX_RETRIES": "0",
    }


def _archive(env, commit: str, name: str) -> Path:
    (path,) = Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit={commit}/run=*/{name}.parquet")
    return path


@pytest.fixture
def based(synthesized_cli_env):
    """acme/v1 with the reference candidate as its baseline, set by a first gate on main (offline judge)."""
    first = _gate(synthesized_cli_env, "base", "--branch", "main")
    assert first.returncode == 0 and "NO BASELINE YET" in first.stdout, first.stdout + first.stderr
    return synthesized_cli_env


def _wrong_answers(env, folder: Path) -> Path:
    """The baseline's retrieval with every answer wrong, as a CI's outputs file."""
    outputs = pd.read_parquet(_archive(env, "base", "candidate_outputs"))
    path = folder / "wrong.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "qa_id": row["qa_id"],
                    "answer": "The moon is made of green cheese.",
                    "contexts": [dict(c) for c in row["contexts"]],
                }
            )
            + "\n"
            for row in outputs.to_dict("records")
        ),
        encoding="utf-8",
    )
    return path


def test_a_judge_that_never_answers_usably_is_not_a_pass_and_promotes_nothing(based, tmp_path):
    wrong = _wrong_answers(based, tmp_path)
    with FakeOpenAIServer(default=INVALID_JSON) as server:
        broken = _broken_judge_env(based, server)
        # The baseline was scored offline: it is re-scored with this (broken) judge, so neither side is measured.
        same = _gate(broken, "same", "--branch", "main")
        # Every answer wrong, retrieval unchanged: passed and was promoted before.
        wrong_answers = _gate(broken, "wrong", "--outputs", str(wrong), "--branch", "main")

    for gate in (same, wrong_answers):
        assert gate.returncode == 2, gate.stdout + gate.stderr
        assert "gate: UNMEASURED" in gate.stdout
        line = next(line for line in gate.stdout.splitlines() if line.startswith("unmeasured faithfulness: "))
        assert "candidate measured on 0 of" in line and "baseline measured on 0 of" in line
        assert "reply is not valid JSON" in line
        assert "now the baseline" not in gate.stdout
        assert gate.stderr.strip().splitlines()[-1].startswith("error: the gate cannot decide on commit")
    assert _history(based) == ["base"]  # nothing was promoted on main


def test_a_judge_failure_against_an_llm_scored_baseline_is_not_a_regression(based):
    """The baseline scored by this very judge (same name: no re-scoring), the candidate's replies all invalid:
    it blocked as a regression (exit 1); it is a failure to measure (exit 2)."""
    with FakeOpenAIServer(default=INVALID_JSON) as server:
        judge_name = build_llm_judge(LLMSettings(base_url=server.base_url, model=FAKE_MODEL)).name
        scores_path = _archive(based, "base", "metric_scores")
        scores = pd.read_parquet(scores_path)
        scores["judge"] = judge_name  # as if this judge, when it still worked, had scored the baseline
        scores.to_parquet(scores_path)

        gate = _gate(_broken_judge_env(based, server), "c2", "--branch", "main")

    assert gate.returncode == 2, gate.stdout + gate.stderr
    assert "re-scored" not in gate.stdout
    line = next(line for line in gate.stdout.splitlines() if line.startswith("unmeasured faithfulness: "))
    assert line.startswith("unmeasured faithfulness: candidate measured on 0 of") and "baseline measured" not in line
    report = pd.read_parquet(_archive(based, "c2", "regression_report"))
    assert "regressed" not in set(report["verdict"])  # the candidate is not blamed for the judge
    assert _history(based) == ["base"]


def test_a_candidate_that_ends_the_process_gets_a_verdict_not_exit_0(based):
    gate = _gate(based, "exits", "--entry", f"{CANDIDATES}:exits_the_process", "--branch", "main", run=rag_eval_process)

    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "gate: BLOCK for commit exits on acme/v1" in gate.stdout
    report = pd.read_parquet(_archive(based, "exits", "regression_report"))
    assert report["note"].str.contains("the candidate process ended (exit code 0) without answering", regex=False).any()
    assert _history(based) == ["base"]


def test_a_named_baseline_is_for_comparison_only(based, tmp_path):
    wrong = str(_wrong_answers(based, tmp_path))
    assert _gate(based, "bad", "--outputs", wrong, "--branch", "main").returncode == 1
    # The same bad answers again, compared with the blocked commit they equal: a pass of that comparison, on
    # main; but a baseline asked for by name never moves the tenant's baseline.
    again = _gate(based, "bad-again", "--outputs", wrong, "--baseline", "bad", "--branch", "main")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "gate: PASS" in again.stdout and "now the baseline" not in again.stdout
    assert _history(based) == ["base"]
    # So the next bad commit is still compared with the real baseline, and blocks.
    assert _gate(based, "bad-3", "--outputs", wrong, "--branch", "main").returncode == 1


def test_only_the_followed_branch_sets_the_first_baseline(synthesized_cli_env):
    env = synthesized_cli_env
    for branch_args in (("--branch", "feature-x"), ()):  # a pull request's first gate, and a local one
        gate = _gate(env, "pr-1", *branch_args)
        assert gate.returncode == 2, gate.stdout + gate.stderr
        assert "gate: NO BASELINE" in gate.stdout and "now the baseline" not in gate.stdout
        assert "the first passing gate on the followed branch" in gate.stderr.strip().splitlines()[-1]
        assert _history(env) == []
    crashes = _gate(env, "crash", "--entry", f"{CANDIDATES}:crashes", "--branch", "main")
    assert crashes.returncode == 2 and _history(env) == []  # on main, but measured on no item
    on_main = _gate(env, "main-1", "--branch", "main")
    assert on_main.returncode == 0 and "main-1 is now the baseline" in on_main.stdout
    assert _history(env) == ["main-1"]


def test_baseline_promote_refuses_an_audit_measured_on_too_few_items(based):
    assert _gate(based, "crash", "--entry", f"{CANDIDATES}:crashes").returncode == 1
    refused = rag_eval_process(based, "baseline", "promote", "--tenant", "acme", "--commit", "crash")
    assert refused.returncode == 2
    assert "crash was measured on too few items to be the baseline of acme/v1" in refused.stderr
    assert "vector store connection refused" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert _history(based) == ["base"]
    # It crashed on every item, so no metric was measured at all: refused whatever the floor.
    forced = rag_eval(based, "baseline", "promote", "--tenant", "acme", "--commit", "crash", "--min-coverage", "0")
    assert forced.returncode == 2 and _history(based) == ["base"]


def test_a_torn_history_line_neither_stops_the_gate_nor_glues_onto_the_next_promotion(based):
    history = Path(based["RAG_EVAL_WAREHOUSE"]) / "acme" / "baseline_history.jsonl"
    with history.open("a", encoding="utf-8") as file:
        file.write('{"branch": "main", "commit": "half-writ')  # a writer killed mid-line

    gate = _gate(based, "next", "--branch", "main")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "baseline: base" in gate.stdout and "next is now the baseline" in gate.stdout
    lines = history.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["commit"] for line in lines] == ["base", "next"]

    history.write_text("garbage\n" + history.read_text(encoding="utf-8"), encoding="utf-8")
    damaged = _gate(based, "after-damage")
    assert damaged.returncode == 2 and "baseline_history.jsonl, line 1, is not a promotion" in damaged.stderr


def test_the_promotion_is_the_last_step_after_the_report_is_stored(
    synthesized_acme, acme_key, instance, resources, monkeypatch, tenant_dirs
):
    """Disk full while the report is written: the run fails, and the candidate is not the baseline. And in a
    run that works, the report is stored before the history changes (the order of the writes, recorded)."""
    from dagster import materialize

    from rag_eval_pipeline.definitions import ALL_ASSETS

    audit = ["candidate_outputs", "metric_scores", "regression_report"]
    first_on_main = {"ops": {"regression_report": {"config": {"branch": "main"}}}}
    store = LocalBaselineStore(Warehouse(tenant_dirs[1]))
    events: list[str] = []
    real_write_report, real_promote = Warehouse.write_report, LocalBaselineStore.promote

    def disk_full(self, *args, **kwargs):
        events.append("report")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Warehouse, "write_report", disk_full)
    failed = materialize(
        ALL_ASSETS,
        selection=audit,
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        run_config=first_on_main,
        raise_on_error=False,
    )
    assert not failed.success
    assert store.history("acme", "v1") == []  # no promotion outlives the report it belongs to

    def recorded_write(self, *args, **kwargs):
        events.append("report")
        return real_write_report(self, *args, **kwargs)

    def recorded_promote(self, *args, **kwargs):
        events.append("promote")
        return real_promote(self, *args, **kwargs)

    events.clear()
    monkeypatch.setattr(Warehouse, "write_report", recorded_write)
    monkeypatch.setattr(LocalBaselineStore, "promote", recorded_promote)
    done = materialize(
        ALL_ASSETS,
        selection=audit,
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        run_config=first_on_main,
    )
    assert done.success and events == ["report", "promote"]
    assert [p.commit for p in store.history("acme", "v1")] == ["working-tree"]
    folder = Warehouse(tenant_dirs[1]).audit_dir("acme", "v1", "working-tree", done.run_id)
    assert (folder / "regression_report.parquet").is_file() and (folder / "regression_report.md").is_file()
