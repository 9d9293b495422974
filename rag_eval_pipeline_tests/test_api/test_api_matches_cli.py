"""The API and the command line are one implementation: evaluate() scores exactly what `rag-eval evaluate`
writes, and synthesize() returns the golden set `rag-eval synthesize` writes, on the same input."""

from __future__ import annotations

import json
import os
import textwrap

import pandas as pd
import pytest

from rag_eval_pipeline import evaluate, synthesize
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.test_api.test_evaluate_api import METRICS, ROWS

pytestmark = [pytest.mark.cli]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """One environment for both doors: the same warehouse (embedding cache), the offline judge."""
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    for variable in ("RAG_EVAL_JUDGE", "RAG_EVAL_JUDGE_BASE_URL", "RAG_EVAL_JUDGE_MODEL", "RAG_EVAL_METRICS"):
        monkeypatch.delenv(variable, raising=False)
    return dict(os.environ)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_evaluate_scores_what_the_command_writes(env, tmp_path, suffix):
    source = tmp_path / f"rows{suffix}"
    if suffix == ".jsonl":
        source.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    else:  # a CSV cell holds a JSON list
        frame = pd.DataFrame(ROWS)
        for column in ("contexts", "context_ids", "gold_chunk_ids"):
            frame[column] = frame[column].map(lambda v: json.dumps(v) if isinstance(v, list) else "")
        frame.to_csv(source, index=False)
    out = tmp_path / "scores.jsonl"
    done = rag_eval(env, "evaluate", "--input", str(source), "--out", str(out), "--metrics", ",".join(METRICS))
    assert done.returncode == 0, done.stderr
    written = pd.read_json(out, lines=True, dtype={"id": str})
    api = evaluate(ROWS, metrics=METRICS).to_pandas()
    assert list(written.columns) == list(api.columns)
    for metric in METRICS:
        assert list(written[f"{metric}_status"]) == list(api[f"{metric}_status"])
        pd.testing.assert_series_equal(
            written[metric].astype("Float64"), api[metric], check_names=False, check_exact=False, rtol=1e-9
        )
    assert api.iloc[:2][METRICS].notna().all().all()  # the two valid rows were scored, not skipped


def test_synthesize_returns_the_golden_set_the_command_writes(env, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text(
        textwrap.dedent(
            """
            # Refunds

            Refunds are paid within 14 days of the returned item reaching our warehouse in Leeds.
            Store credit never expires and can be spent in any of our 42 shops across the United Kingdom.

            # Shipping

            Standard shipping takes 3 to 5 working days. Express shipping costs 7 pounds and arrives the next day.
            Orders over 50 pounds ship for free within the United Kingdom, but not to the Channel Islands.
            """
        )
    )
    out = tmp_path / "golden.jsonl"
    done = rag_eval(env, "synthesize", "--docs", str(docs), "--out", str(out), "--n", "6", "--types", "simple")
    assert done.returncode == 0, done.stderr
    from_command = pd.read_json(out, lines=True)
    golden = synthesize(docs, n=6, types="simple")
    assert len(golden) == len(from_command) >= 1
    assert list(golden["qa_id"]) == list(from_command["qa_id"])
    assert list(golden["question"]) == list(from_command["question"])
    assert list(golden["ground_truth"]) == list(from_command["ground_truth"])
    assert len(golden.attrs["rejected"]) == len(pd.read_json(tmp_path / "golden.rejected.jsonl", lines=True))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no readable document"):
        synthesize(empty, n=3)
