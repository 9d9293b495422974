"""`rag-eval evaluate` on JSONL, CSV and Parquet inputs, with RAGAS or our own column names."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.evaluation.tabular import read_table, to_items

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
CONTEXT = "Refunds are processed within 14 days of the request. Store credit never expires."

RAGAS_ROWS = [
    {"id": "a", "user_input": "How long do refunds take?", "retrieved_contexts": [CONTEXT],
     "response": "Refunds are processed within 14 days of the request.",
     "reference": "Refunds are processed within 14 days.", "retrieved_context_ids": ["policy#0"],
     "reference_context_ids": ["policy#0"]},
    {"id": "b", "user_input": "How long do refunds take?", "retrieved_contexts": [CONTEXT],
     "response": "Refunds are processed within 45 days of the request.",
     "reference": "Refunds are processed within 14 days.", "retrieved_context_ids": ["other#3"],
     "reference_context_ids": ["policy#0"]},
    {"id": "c", "user_input": "", "retrieved_contexts": [CONTEXT], "response": "x", "reference": "y"},
    {"id": "d", "user_input": "Does store credit expire?", "retrieved_contexts": "not a list", "response": "No.",
     "reference": "Store credit never expires."},
]


def _run(tmp_path, rows, suffix, out_suffix=".jsonl", *extra):
    source = tmp_path / f"in{suffix}"
    frame = pd.DataFrame(rows)
    if suffix == ".jsonl":
        source.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    elif suffix == ".csv":
        for column in ("retrieved_contexts", "retrieved_context_ids", "reference_context_ids"):
            frame[column] = frame[column].map(lambda v: json.dumps(v) if isinstance(v, list) else ("" if v is None or v != v else str(v)))
        frame.to_csv(source, index=False)
    out = tmp_path / f"out{out_suffix}"
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    completed = subprocess.run(
        [RAG_EVAL, "evaluate", "--input", str(source), "--out", str(out), *extra],
        capture_output=True, text=True, env=env, timeout=300,
    )
    return completed, out


def test_ragas_columns_jsonl_scores_good_rows_and_reports_bad_ones(tmp_path):
    completed, out = _run(tmp_path, RAGAS_ROWS, ".jsonl")
    assert completed.returncode == 0, completed.stderr
    assert "row 3 (id c): missing question" in completed.stderr
    assert "row 4 (id d): contexts is not a list" in completed.stderr

    result = pd.read_json(out, lines=True, dtype=False).set_index("id")
    assert list(result.index) == ["a", "b", "c", "d"]
    assert result.loc["a", "faithfulness"] == 1.0 and result.loc["b", "faithfulness"] == 0.0  # 45 days is invented
    assert result.loc["a", "hit_rate"] == 1.0 and result.loc["b", "hit_rate"] == 0.0
    assert result.loc["c", "faithfulness_status"] == "invalid" and "missing question" in result.loc["c", "error"]
    assert "faithfulness" in completed.stdout and "2 rows scored, 2 invalid" in completed.stdout


def test_csv_with_json_lists_and_a_metric_subset_to_parquet(tmp_path):
    completed, out = _run(tmp_path, RAGAS_ROWS[:2], ".csv", ".parquet", "--metrics", "mrr,faithfulness")
    assert completed.returncode == 0, completed.stderr
    result = pd.read_parquet(out)
    assert list(result.columns) == ["id", "mrr", "mrr_status", "faithfulness", "faithfulness_status", "error"]
    assert result["mrr"].tolist() == [1.0, 0.0]


def test_unmeasured_metrics_say_why(tmp_path):
    rows = [{"question": "Does store credit expire?", "contexts": [CONTEXT], "answer": "I don't know.", "ground_truth": ""}]
    completed, out = _run(tmp_path, rows, ".jsonl", ".jsonl", "--metrics", "faithfulness,hit_rate,context_recall")
    assert completed.returncode == 0, completed.stderr
    result = pd.read_json(out, lines=True).iloc[0]
    assert result["faithfulness_status"] == "unmeasured: the answer makes no statement to verify"
    assert result["hit_rate_status"] == "unmeasured: item has no gold chunk ids"
    assert result["context_recall_status"].startswith("unmeasured: no ground-truth")


@pytest.mark.parametrize("args, message", [
    (("--metrics", "faithfulness,bleu"), "unknown metrics ['bleu']"),
    (("--judge", "llm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"), "judge server at http://127.0.0.1:9/v1"),
])
def test_bad_arguments_exit_2_with_a_clear_message(tmp_path, args, message):
    completed, _ = _run(tmp_path, RAGAS_ROWS[:1], ".jsonl", ".jsonl", *args)
    assert completed.returncode == 2
    assert message in completed.stderr


def test_unsupported_input_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unsupported format '.xlsx'"):
        read_table(tmp_path / "data.xlsx")


def test_context_ids_must_match_contexts():
    frame = pd.DataFrame([{"question": "q?", "contexts": ["a", "b"], "context_ids": ["only-one"], "answer": "a"}])
    items, bad = to_items(frame)
    assert items == [] and bad[0].reason == "1 context ids for 2 contexts"
