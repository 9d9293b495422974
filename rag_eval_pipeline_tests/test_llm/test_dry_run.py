"""Cost before running: `plan_calls` renders the requests the LLM judge would send and looks them up in
the call cache, sending nothing; `rag-eval evaluate --dry-run` and `rag-eval gate --dry-run` print it
and exit 0 without a call, a Dagster run or a file written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import CORRECTNESS
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge, plan_calls
from rag_eval_pipeline.core.llm.cache import LLMCallCache, request_key
from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM
from rag_eval_pipeline.core.metrics.registry import JUDGED_METRICS, needed_judgements, resolve
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, follow_the_schema
from rag_eval_pipeline_tests.support.cli import rag_eval

ITEMS = [
    EvalItem(
        "q1",
        "How long are API logs kept?",
        "API logs are kept for 90 days. They are then deleted.",
        [{"id": "a", "text": "API request logs are kept for 90 days."}, {"id": "b", "text": "Lunch is at noon."}],
        "API request logs are kept for 90 days.",
    ),
    EvalItem("q2", "Who approves exceptions?", "I don't know.", [{"id": "c", "text": "The office."}], "The office."),
]
NEEDS = needed_judgements(resolve(JUDGED_METRICS))


def _settings(base_url: str) -> LLMSettings:
    return LLMSettings(base_url=base_url, model="fake", concurrency=1)


def test_the_plan_renders_exactly_the_requests_a_run_sends_and_then_finds_them_cached():
    cache = LLMCallCache()
    before = plan_calls(ITEMS, NEEDS, _settings("http://127.0.0.1:9/v1"), cache=cache)
    with FakeOpenAIServer(default=follow_the_schema) as server:
        LLMJudge(StructuredLLM(_settings(server.base_url), cache)).judge_many(ITEMS, NEEDS)
    sent = [request_key(body) for body in server.requests]

    # Before the run: every call but correctness (whose prompt lists the judge's statements) is the one sent.
    assert not any(call.cached for call in before.calls)
    exact = sorted(call.key for call in before.calls if not call.estimated)
    assert exact == sorted(key for key, body in zip(sent, server.requests) if "ANSWER STATEMENTS" not in _prompt(body))
    # The declining answer ("I don't know.") makes no claim: correctness is planned for the first item only.
    assert [(c.kind, c.estimated) for c in before.calls if c.kind == CORRECTNESS] == [(CORRECTNESS, True)]

    after = plan_calls(ITEMS, NEEDS, _settings("http://127.0.0.1:9/v1"), cache=cache)
    assert sorted(call.key for call in after.calls) == sorted(sent)
    assert all(call.cached and not call.estimated for call in after.calls)
    assert after.by_kind()["answer"] == {
        "calls": 2,
        "cached": 2,
        "estimated": 0,
        "to_send": 0,
        "prompt_tokens": 0,
        "completion_tokens_at_most": 0,
    }


def _prompt(body: dict) -> str:
    return body["messages"][-1]["content"]


def test_the_plan_counts_tokens_from_the_rendered_prompts():
    plan = plan_calls(ITEMS, needed_judgements(resolve(["faithfulness"])), _settings("http://127.0.0.1:9/v1"))
    [row] = plan.by_kind().values()
    chars = [call.prompt_chars for call in plan.calls]
    assert row["calls"] == row["to_send"] == 2 and row["cached"] == 0
    assert row["prompt_tokens"] == sum(-(-c // 4) for c in chars) and all(c > len(ITEMS[0].answer) for c in chars)
    assert row["completion_tokens_at_most"] == 2 * 768
    assert "approximate" in plan.describe() and "| total | 2 | 0 | 2 |" in plan.describe()


def _rows_file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    rows = [
        {"question": i.question, "answer": i.answer, "contexts": i.context_texts, "ground_truth": i.ground_truth}
        for i in ITEMS
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _evaluate(tmp_path: Path, base_url: str, *options: str):
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    out = tmp_path / "scores.jsonl"
    return rag_eval(
        env,
        "evaluate",
        "--input",
        str(_rows_file(tmp_path)),
        "--out",
        str(out),
        "--metrics",
        "faithfulness",
        "--judge",
        "llm",
        "--base-url",
        base_url,
        "--model",
        "fake",
        "--cache",
        str(tmp_path / "calls.sqlite"),
        *options,
    )


@pytest.mark.cli
def test_evaluate_dry_run_sends_nothing_writes_nothing_and_counts_the_cache(tmp_path):
    with FakeOpenAIServer(default=follow_the_schema) as server:
        dry = _evaluate(tmp_path, server.base_url, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert server.requests == [] and not (tmp_path / "scores.jsonl").exists()
        assert not (tmp_path / "calls.sqlite").exists()  # not even an empty cache file
        assert "2 LLM calls for 2 items" in dry.stdout and "| answer_statements | 2 | 0 | 2 |" in dry.stdout

        scored = _evaluate(tmp_path, server.base_url)
        assert scored.returncode == 0, scored.stderr
        sent = len(server.requests)
        again = _evaluate(tmp_path, server.base_url, "--dry-run")
    assert sent == 2 and len(server.requests) == sent  # the second dry run sent nothing either
    assert "2 answered by the call cache, 0 to send" in again.stdout
    assert "| answer_statements | 2 | 2 | 0 | 0 | 0 |" in again.stdout


@pytest.mark.cli
def test_evaluate_dry_run_with_the_offline_judge_makes_no_llm_call(tmp_path):
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    args = ("evaluate", "--input", str(_rows_file(tmp_path)), "--out", str(tmp_path / "s.jsonl"), "--dry-run")
    completed = rag_eval(env, *args, "--judge", "offline")
    assert completed.returncode == 0 and completed.stdout.strip() == "0 LLM calls (offline judge) for 2 items"
    assert not (tmp_path / "s.jsonl").exists()


# --- the gate: the golden set of the gated version, with the candidate's outputs when given -------------


@pytest.fixture
def gate_env(synthesized_acme, tmp_path):
    documents_root, warehouse_root = synthesized_acme
    return {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
        "RAG_EVAL_WAREHOUSE": str(warehouse_root),
        "RAG_EVAL_JUDGE": "llm",
        "RAG_EVAL_JUDGE_MODEL": "fake",
    }


def _golden(env: dict) -> pd.DataFrame:
    return pd.read_parquet(Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1" / "golden_set.parquet")


@pytest.mark.dagster
@pytest.mark.cli
def test_gate_dry_run_plans_the_audits_calls_without_a_run(gate_env, tmp_path):
    golden = _golden(gate_env)
    outputs = tmp_path / "outputs.jsonl"
    answered = golden.head(3)
    outputs.write_text(
        "".join(
            json.dumps(
                {"qa_id": g["qa_id"], "answer": g["ground_truth"], "contexts": [{"id": "x", "text": "A chunk."}]}
            )
            + "\n"
            for g in answered.to_dict("records")
        )
    )
    with FakeOpenAIServer(default=follow_the_schema) as server:
        env = {**gate_env, "RAG_EVAL_JUDGE_BASE_URL": server.base_url}
        with_outputs = rag_eval(
            env, "gate", "--tenant", "acme", "--candidate", "c1", "--outputs", str(outputs), "--dry-run"
        )
        reference = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "c1", "--dry-run")
    assert with_outputs.returncode == 0 and reference.returncode == 0, with_outputs.stderr + reference.stderr
    assert server.requests == [] and not Path(gate_env["DAGSTER_HOME"]).exists()  # no instance, so no run
    assert f"3 of {len(golden)} golden items answered" in with_outputs.stdout
    assert "for 3 items (judge llm:fake:decomposed:" in with_outputs.stdout
    assert (
        f"{len(golden)} golden items; their answers" in reference.stdout and "prompt tokens exclude" in reference.stdout
    )
    # Per golden item with a reference answer: the answer, ground-truth, context-relevance and correctness calls.
    assert f"{4 * len(golden)} LLM calls for {len(golden)} items" in reference.stdout


@pytest.mark.dagster
@pytest.mark.cli
def test_gate_dry_run_on_a_tenant_without_a_golden_set_is_one_line_exit_2(gate_env):
    completed = rag_eval(gate_env, "gate", "--tenant", "globex", "--candidate", "c1", "--dry-run")
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "error: tenant 'globex' has no published golden set yet: run its synthesis job first"
    ]
