"""The Python API's evaluate(): the same scores from every shape of input, the same as `rag-eval evaluate`,
on an event loop too, and bad input as a one-line ValueError."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pandas as pd
import pytest

import rag_eval_pipeline
from rag_eval_pipeline import EvaluationResult, aevaluate, evaluate
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply, follow_the_schema

CONTEXT = "Refunds are processed within 14 days of the request. Store credit never expires."
ROWS = [
    {
        "id": "a",
        "question": "How long do refunds take?",
        "contexts": [CONTEXT],
        "answer": "Refunds are processed within 14 days of the request.",
        "ground_truth": "Refunds are processed within 14 days.",
        "context_ids": ["policy#0"],
        "gold_chunk_ids": ["policy#0"],
    },
    {
        "id": "b",
        "question": "How long do refunds take?",
        "contexts": [CONTEXT],
        "answer": "Refunds are processed within 45 days of the request.",
        "ground_truth": "Refunds are processed within 14 days.",
        "context_ids": ["other#3"],
        "gold_chunk_ids": ["policy#0"],
    },
    {"id": "c", "question": "", "contexts": [CONTEXT], "answer": "x", "ground_truth": "y"},
]
RAGAS_NAMES = {
    "question": "user_input",
    "contexts": "retrieved_contexts",
    "answer": "response",
    "ground_truth": "reference",
    "context_ids": "retrieved_context_ids",
    "gold_chunk_ids": "reference_context_ids",
}
METRICS = ["faithfulness", "answer_correctness", "hit_rate", "mrr"]


@pytest.fixture(autouse=True)
def warehouse(tmp_path, monkeypatch):
    """The API reads the same settings as the CLI: the embedding cache in this test's warehouse, offline judge."""
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    for variable in ("RAG_EVAL_JUDGE", "RAG_EVAL_JUDGE_BASE_URL", "RAG_EVAL_JUDGE_MODEL", "RAG_EVAL_METRICS"):
        monkeypatch.delenv(variable, raising=False)


class RagasShaped:
    """An object shaped like RAGAS's EvaluationDataset: its rows through to_pandas(), RAGAS's column names."""

    def __init__(self, rows):
        self.rows = rows

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame([{RAGAS_NAMES.get(k, k): v for k, v in row.items()} for row in self.rows])


def test_every_shape_of_input_gives_the_same_scores(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    results = [
        evaluate(ROWS, metrics=METRICS),
        evaluate(pd.DataFrame(ROWS), metrics=METRICS),
        evaluate(RagasShaped(ROWS), metrics=METRICS),
        evaluate(path, metrics=METRICS),
        evaluate(str(path), metrics=",".join(METRICS)),
    ]
    first = results[0].to_pandas()
    for other in results[1:]:
        pd.testing.assert_frame_equal(other.to_pandas(), first)
    assert list(first["id"]) == ["a", "b", "c"]
    assert first.loc[0, "hit_rate"] == 1.0 and first.loc[1, "hit_rate"] == 0.0
    assert first.loc[0, "faithfulness"] > first.loc[1, "faithfulness"]  # 45 days is not in the context
    assert first.loc[2, "faithfulness_status"] == "invalid" and first.loc[2, "error"] == "missing question"


def test_the_result_summarises_and_says_why_a_metric_was_not_measured():
    rows = [*ROWS[:2], {**ROWS[0], "id": "d", "gold_chunk_ids": [], "answer": "I do not know."}]
    result = evaluate(rows, metrics=["faithfulness", "hit_rate"])
    assert isinstance(result, EvaluationResult) and result.judge == "offline-support-v3"
    summary = result.summary().set_index("metric")
    assert summary.loc["hit_rate", "measured"] == 2 and summary.loc["hit_rate", "rows"] == 3
    assert summary.loc["hit_rate", "mean"] == 0.5
    reasons = result.unmeasured_reasons()
    assert reasons.to_dict("records") == [
        {"metric": "faithfulness", "reason": "the answer makes no statement to verify", "rows": 1},
        {"metric": "hit_rate", "reason": "item has no gold chunk ids", "rows": 1},
    ]
    assert "hit_rate" in repr(result) and "2/3" in repr(result)


def test_one_metric_object_is_a_metric_set():
    def short(item):
        return 1.0 if len(item.answer.split()) <= 6 else 0.0

    result = evaluate(ROWS[:2], metrics=short)
    assert list(result.to_pandas()["short"]) == [0.0, 0.0]  # a function passed as an object: its own name
    with pytest.raises(ValueError, match="needs a name"):
        evaluate(ROWS[:1], metrics=lambda item: 1.0)


def test_nothing_measured_is_no_mean_not_nan():
    result = evaluate([{**ROWS[0], "gold_chunk_ids": []}], metrics=["hit_rate"])
    assert result.summary()["mean"].isna().all() and result.summary()["mean"].dtype == "Float64"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: evaluate(ROWS, metrics=["faithfulness", "bleu"]), "unknown metric 'bleu'"),
        (lambda: evaluate(ROWS, k=0), "k must be an integer of at least 1"),
        (lambda: evaluate(42), "evaluate() takes a pandas DataFrame, a list of dicts"),
        (lambda: evaluate([]), "no rows to evaluate"),
        (lambda: evaluate(ROWS, metrics=[]), "metrics names no metric"),
        (lambda: evaluate(ROWS, judge={"mode": "sideways"}), "judge option mode"),
        (lambda: evaluate(ROWS, judge="llm"), "needs a base URL and a model"),
        (lambda: evaluate(ROWS, metrics=["os:system"]), "not in an allowed package"),
        (lambda: evaluate("missing.jsonl"), "does not exist"),  # a FileNotFoundError, as open() raises
        (lambda: evaluate(ROWS, judge=5), "judge is None, 'offline', 'llm' or a dict"),
        (lambda: rag_eval_pipeline.criterion("Polite.", steps="Read the answer."), "steps is a list of strings"),
        (lambda: rag_eval_pipeline.criterion(None), "a criterion's text is a sentence"),
        (lambda: rag_eval_pipeline.gate("acme", "c1", decide_on="PPI"), "decide_on must be 'judge' or 'ppi'"),
        (lambda: rag_eval_pipeline.gate("acme", "c1", tolerance="0.1"), "tolerance must be a number"),
        (lambda: rag_eval_pipeline.gate("acme", "c1", metrics=[len]), "gate() takes metric names"),
    ],
)
def test_bad_input_is_a_one_line_value_error(call, message):
    with pytest.raises((ValueError, FileNotFoundError)) as refused:
        call()
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_aevaluate_on_a_running_loop_gives_evaluates_scores():
    async def in_a_notebook() -> tuple[EvaluationResult, EvaluationResult]:
        return await aevaluate(ROWS, metrics=METRICS), evaluate(ROWS, metrics=METRICS)  # both on a live loop

    awaited, blocking = asyncio.run(in_a_notebook())
    pd.testing.assert_frame_equal(awaited.to_pandas(), blocking.to_pandas())
    pd.testing.assert_frame_equal(awaited.to_pandas(), evaluate(ROWS, metrics=METRICS).to_pandas())


def test_the_llm_judge_runs_from_a_notebooks_loop_and_grades_a_criterion():
    """A notebook's cell runs inside an event loop: evaluate() must not call asyncio.run on it. The criterion's
    request fixes the count of step findings in its schema, and its 1-to-5 grade becomes a score in [0, 1]."""
    polite = rag_eval_pipeline.criterion(
        "The answer is polite.", steps=["Read the answer.", "Judge its tone.", "Grade it."], name="polite"
    )
    with FakeOpenAIServer(default=follow_the_schema) as server:
        judge = {"kind": "llm", "base_url": server.base_url, "model": "fake", "cache": "", "max_retries": 0}

        async def cell():
            return evaluate(ROWS[:2], metrics=[polite], judge=judge), await aevaluate(ROWS[:1], [polite], judge)

        blocking, awaited = asyncio.run(cell())
        criterion_requests = [r for r in server.requests if "CRITERION: The answer is polite." in json.dumps(r)]
    assert len(criterion_requests) == 3  # one per row, nothing else asked
    schema = criterion_requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["step_findings"]["minItems"] == schema["properties"]["step_findings"]["maxItems"] == 3
    assert list(blocking.to_pandas()["polite"]) == [1.0, 1.0]  # the fake's grade: the schema's highest, 5
    assert awaited.to_pandas().loc[0, "polite_status"] == "ok"
    assert (
        blocking.judge.startswith("llm:fake:decomposed:prompt-") and f"+polite@criterion-{polite.key}" in blocking.judge
    )


def test_a_wrong_count_of_findings_leaves_the_criterion_unmeasured_with_why():
    polite = rag_eval_pipeline.criterion("The answer is polite.", steps=["Read.", "Grade."], name="polite")
    wrong = Reply(200, json.dumps({"step_findings": ["only one"], "score": 4}))
    with FakeOpenAIServer([wrong, wrong]) as server:
        judge = {"kind": "llm", "base_url": server.base_url, "model": "fake", "cache": "", "max_retries": 0}
        result = evaluate(ROWS[:1], metrics=[polite], judge=judge)
    status = result.to_pandas().loc[0, "polite_status"]
    assert status.startswith("unmeasured: ") and "step_findings" in status


def test_importing_the_api_loads_nothing_heavy():
    probe = (
        "import json, sys\n"
        "from rag_eval_pipeline import evaluate, gate, synthesize, metric, criterion, assert_rag\n"
        "print(json.dumps(sorted(m for m in ('pandas', 'dagster', 'torch', 'numpy') if m in sys.modules)))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(loaded.stdout) == []
