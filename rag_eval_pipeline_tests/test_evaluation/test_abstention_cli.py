"""`rag-eval evaluate` with the offline judge: the items it abstains on say so, row by row."""

import json
import os

import pandas as pd
import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.test_evaluation.test_abstention import (
    ANSWER_NOT_ENGLISH,
    CONTEXTS,
    GERMAN,
    LONG,
    LONG_REASON,
    PARAPHRASE_REASON,
    PARAPHRASED,
    QUESTION,
    SHORT,
)

pytestmark = [pytest.mark.cli]

ANSWERS = {"short": SHORT, "long": LONG, "paraphrased": PARAPHRASED, "german": GERMAN}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("abstention")
    source, out = folder / "in.jsonl", folder / "out.jsonl"
    rows = [
        {"id": name, "question": QUESTION, "contexts": [c["text"] for c in CONTEXTS], "answer": answer}
        for name, answer in ANSWERS.items()
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(folder / "warehouse")}
    completed = rag_eval(
        env, "evaluate", "--input", str(source), "--out", str(out), "--metrics", "faithfulness,answer_relevance"
    )
    assert completed.returncode == 0, completed.stderr
    return completed, pd.read_json(out, lines=True, dtype=False).set_index("id")


def test_each_abstention_is_unmeasured_with_its_reason(evaluated):
    _, result = evaluated

    assert result.loc["long", "faithfulness_status"] == f"unmeasured: {LONG_REASON}"
    assert result.loc["paraphrased", "faithfulness_status"] == f"unmeasured: {PARAPHRASE_REASON}"
    assert result.loc["german", "faithfulness_status"] == f"unmeasured: {ANSWER_NOT_ENGLISH}"
    assert result.loc["german", "answer_relevance_status"] == f"unmeasured: {ANSWER_NOT_ENGLISH}"
    for name in ("long", "paraphrased", "german"):
        assert pd.isna(result.loc[name, "faithfulness"]), name  # no score at all, not a 0


def test_the_short_answer_is_scored_and_the_summary_counts_only_it(evaluated):
    completed, result = evaluated

    assert result.loc["short", "faithfulness_status"] == "ok" and result.loc["short", "faithfulness"] == 1.0
    assert result.loc["long", "answer_relevance_status"] == "ok"  # length blinds the statement checks only
    faithfulness_line = next(line for line in completed.stdout.splitlines() if line.startswith("faithfulness"))
    assert faithfulness_line.split()[-1] == "1/4"
    assert "judge offline-support-v3" in completed.stdout
