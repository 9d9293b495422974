"""`rag-eval evaluate` on JSONL, CSV and Parquet inputs, with RAGAS or our own column names, and on bad input.

The command runs in the test's process (see support/cli.py), but where the test reads all of stderr (no
traceback, one line): there it runs as a user runs it, in a subprocess.
"""

import json
import os

import pandas as pd
import pytest

from rag_eval_pipeline import cli
from rag_eval_pipeline.cli import files
from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process

pytestmark = [pytest.mark.cli]

CONTEXT = "Refunds are processed within 14 days of the request. Store credit never expires."

RAGAS_ROWS = [
    {
        "id": "a",
        "user_input": "How long do refunds take?",
        "retrieved_contexts": [CONTEXT],
        "response": "Refunds are processed within 14 days of the request.",
        "reference": "Refunds are processed within 14 days.",
        "retrieved_context_ids": ["policy#0"],
        "reference_context_ids": ["policy#0"],
    },
    {
        "id": "b",
        "user_input": "How long do refunds take?",
        "retrieved_contexts": [CONTEXT],
        "response": "Refunds are processed within 45 days of the request.",
        "reference": "Refunds are processed within 14 days.",
        "retrieved_context_ids": ["other#3"],
        "reference_context_ids": ["policy#0"],
    },
    {"id": "c", "user_input": "", "retrieved_contexts": [CONTEXT], "response": "x", "reference": "y"},
    {
        "id": "d",
        "user_input": "Does store credit expire?",
        "retrieved_contexts": "not a list",
        "response": "No.",
        "reference": "Store credit never expires.",
    },
]


def _run(tmp_path, rows, suffix, out_suffix=".jsonl", *extra):
    source = tmp_path / f"in{suffix}"
    frame = pd.DataFrame(rows)
    if suffix == ".jsonl":
        source.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    elif suffix == ".csv":
        for column in ("retrieved_contexts", "retrieved_context_ids", "reference_context_ids"):
            frame[column] = frame[column].map(
                lambda v: json.dumps(v) if isinstance(v, list) else ("" if v is None or v != v else str(v))
            )
        frame.to_csv(source, index=False)
    out = tmp_path / f"out{out_suffix}"
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    completed = rag_eval(env, "evaluate", "--input", str(source), "--out", str(out), *extra)
    return completed, out


def test_ragas_columns_jsonl_scores_good_rows_and_reports_bad_ones(tmp_path):
    completed, out = _run(tmp_path, RAGAS_ROWS, ".jsonl")
    assert completed.returncode == 0, completed.stderr
    assert "line 3 (id c): missing question" in completed.stderr
    assert "line 4 (id d): contexts is not a list" in completed.stderr

    result = pd.read_json(out, lines=True, dtype=False).set_index("id")
    assert list(result.index) == ["a", "b", "c", "d"]
    assert result.loc["a", "faithfulness"] == 1.0 and result.loc["b", "faithfulness"] == 0.0  # 45 days is invented
    assert result.loc["a", "hit_rate"] == 1.0 and result.loc["b", "hit_rate"] == 0.0
    assert result.loc["c", "faithfulness_status"] == "invalid" and "missing question" in result.loc["c", "error"]
    assert "faithfulness" in completed.stdout and "2 rows scored, 2 invalid" in completed.stdout


def test_csv_with_json_lists_and_a_metric_subset_to_parquet(tmp_path):
    completed, out = _run(tmp_path, RAGAS_ROWS, ".csv", ".parquet", "--metrics", "mrr,faithfulness")
    assert completed.returncode == 0, completed.stderr
    assert "row 3 (id c): missing question" in completed.stderr  # a CSV counts data rows, not lines
    result = pd.read_parquet(out)
    assert list(result.columns) == ["id", "mrr", "mrr_status", "faithfulness", "faithfulness_status", "error"]
    assert result["mrr"].tolist()[:2] == [1.0, 0.0] and result["mrr_status"].tolist()[2:] == ["invalid"] * 2


def test_unmeasured_metrics_say_why(tmp_path):
    rows = [
        {"question": "Does store credit expire?", "contexts": [CONTEXT], "answer": "I don't know.", "ground_truth": ""}
    ]
    completed, out = _run(tmp_path, rows, ".jsonl", ".jsonl", "--metrics", "faithfulness,hit_rate,context_recall")
    assert completed.returncode == 0, completed.stderr
    result = pd.read_json(out, lines=True).iloc[0]
    assert result["faithfulness_status"] == "unmeasured: the answer makes no statement to verify"
    assert result["hit_rate_status"] == "unmeasured: item has no gold chunk ids"
    assert result["context_recall_status"].startswith("unmeasured: no ground-truth")


@pytest.mark.parametrize(
    "args, message",
    [
        (("--metrics", "faithfulness,bleu"), "unknown metric 'bleu'"),
        (
            ("--judge", "llm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"),
            "judge server at http://127.0.0.1:9/v1",
        ),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(tmp_path, args, message):
    completed, _ = _run(tmp_path, RAGAS_ROWS[:1], ".jsonl", ".jsonl", *args)
    assert completed.returncode == 2
    assert message in completed.stderr


# --- bad rows in a JSONL file: one run, several findings -------------------------------------------

FAITHFUL = {
    "question": "How long do refunds take?",
    "contexts": [CONTEXT],
    "answer": "Refunds are processed within 14 days of the request.",
}
BAD_LINES = [
    json.dumps({"id": "a", **FAITHFUL}),
    "",
    '{"id": "b", "question": ',
    "[1, 2]",
    json.dumps({**FAITHFUL, "id": "c", "answer": "Refunds are processed quickly. " * 33_000}),  # about 1 MB
    json.dumps({**FAITHFUL, "id": "a", "answer": "Refunds are processed within 45 days of the request."}),
]


@pytest.fixture(scope="module")
def bad_lines_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_lines")
    source, out = folder / "in.jsonl", folder / "new" / "out.jsonl"  # a folder still to be created
    source.write_text("\n".join(BAD_LINES) + "\n")
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(folder / "warehouse")}
    completed = rag_eval_process(  # a process: all of its stderr is seen
        env, "evaluate", "--input", str(source), "--out", str(out), "--metrics", "faithfulness,hit_rate"
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    return completed, pd.read_json(out, lines=True, dtype=False)


def test_malformed_lines_are_reported_by_line_number_and_the_others_scored(bad_lines_run):
    completed, result = bad_lines_run
    assert "line 3 (id 3): not valid JSON" in completed.stderr
    assert "line 4 (id 4): expected a JSON object, got a JSON array" in completed.stderr
    assert result["id"].tolist() == ["a", "3", "4", "c", "a"]  # one row per non-blank line, in order
    assert result["faithfulness_status"].tolist() == ["ok", "invalid", "invalid", "invalid", "ok"]
    assert "not valid JSON" in result.loc[1, "error"]
    assert "2 rows scored, 3 invalid" in completed.stdout


def test_an_oversized_field_is_refused_with_its_size_and_the_limit(bad_lines_run):
    completed, result = bad_lines_run
    assert "line 5 (id c): answer is 1,022,999 characters, over the limit of 20,000 per field" in completed.stderr
    assert "over the limit" in result.loc[3, "error"]


def test_rows_sharing_an_id_keep_their_own_scores_and_the_duplication_is_reported(bad_lines_run):
    completed, result = bad_lines_run
    assert "warning: id 'a' is on line 1, line 6" in completed.stderr
    # The first 'a' copies the context, the second invents "45 days".
    assert result.loc[0, "faithfulness"] == 1.0 and result.loc[4, "faithfulness"] == 0.0


@pytest.mark.parametrize("out_suffix", [".jsonl", ".parquet"])
def test_a_lone_surrogate_is_scored_as_a_replacement_character(tmp_path, out_suffix):
    """JSON may escape half of a UTF-16 pair with no other half ("\\ud800"); json.loads accepts it, but no
    UTF-8 writer or hash does. The row is scored with U+FFFD in its place, not the whole run lost."""
    rows = [
        {**FAITHFUL, "id": "q\ud800", "question": "How long do refunds take?\ud800"},
        {
            **FAITHFUL,
            "id": "a",
            "answer": FAITHFUL["answer"] + " \udfff",
            "contexts": [CONTEXT + " \udbff"],
            "ground_truth": "Refunds take 14 days.\ud83d",
        },
        {**FAITHFUL, "id": "pair", "answer": FAITHFUL["answer"] + " \U0001f600"},  # a whole pair stays itself
    ]
    source, out = tmp_path / "in.jsonl", tmp_path / f"out{out_suffix}"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="ascii")  # escapes, as JSON allows
    completed = rag_eval(
        {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "w")},
        "evaluate",
        "--input",
        str(source),
        "--out",
        str(out),
        "--metrics",
        "faithfulness,answer_correctness",
    )

    assert completed.returncode == 0, completed.stderr
    assert "3 rows scored, 0 invalid" in completed.stdout
    result = pd.read_parquet(out) if out_suffix == ".parquet" else pd.read_json(out, lines=True, dtype=False)
    assert result["id"].tolist() == ["q\ufffd", "a", "pair"]
    assert result["faithfulness_status"].tolist() == ["ok"] * 3 and result["faithfulness"].tolist() == [1.0] * 3
    assert result["answer_correctness_status"].tolist()[1] == "ok"


def test_fields_that_are_not_text_are_invalid_rows_not_scored_as_their_repr(tmp_path):
    rows = [
        {**FAITHFUL, "id": "list", "question": ["How long do", "refunds take?"]},
        {**FAITHFUL, "id": "none", "contexts": [None]},
        {**FAITHFUL, "id": "mapping", "answer": {"text": "14 days."}},
        {**FAITHFUL, "id": "number", "question": 14},
    ]
    completed, out = _run(tmp_path, rows, ".jsonl", ".jsonl", "--metrics", "faithfulness,context_precision")

    assert completed.returncode == 0, completed.stderr
    assert "line 1 (id list): question is not text: a list; not scored" in completed.stderr
    assert "line 2 (id none): context 1 is not text: null; not scored" in completed.stderr
    assert "line 3 (id mapping): answer is not text: a mapping; not scored" in completed.stderr
    result = pd.read_json(out, lines=True, dtype=False)
    assert result["faithfulness_status"].tolist() == ["invalid", "invalid", "invalid", "ok"]
    assert result["error"].tolist()[:3] == [
        "question is not text: a list",
        "context 1 is not text: null",
        "answer is not text: a mapping",
    ]
    assert "1 rows scored, 3 invalid" in completed.stdout


def test_a_csv_with_a_column_given_twice_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(files, "build_judge", _refuse_to_judge)
    source = tmp_path / "in.csv"
    source.write_text("question,answer,answer\nHow long do refunds take?,14 days.,45 days.\n", encoding="utf-8")

    status = cli.main(["evaluate", "--input", str(source), "--out", str(tmp_path / "out.jsonl")])

    stderr = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(stderr) == 1
    assert stderr[0] == f"error: {source} names the column 'answer' twice: a reader would see only one of them"
    assert not (tmp_path / "out.jsonl").exists()


def test_an_empty_input_is_refused_in_one_line(tmp_path):
    source = tmp_path / "empty.jsonl"
    source.write_text("")
    completed = rag_eval_process(
        {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "w")},
        "evaluate",
        "--input",
        str(source),
        "--out",
        str(tmp_path / "out.jsonl"),
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [f"error: input {source} holds no rows"]
    assert not (tmp_path / "out.jsonl").exists()


# --- arguments and the output path are checked before any work ----------------------------------


def _refuse_to_judge(judge):
    """A fake judge builder: any call means the run got past the checks."""
    raise AssertionError("the judge was built: the arguments were not checked first")


@pytest.mark.parametrize(
    "extra, out_name, message",
    [
        ((), "scores.txt", "unsupported format '.txt'"),
        ((), "a-file/scores.jsonl", "a-file is not a folder"),
        ((), "a-folder.jsonl", "a-folder.jsonl is a folder"),
        ((), "in.jsonl", "would overwrite the input"),
        (("--metrics", ","), "scores.jsonl", "--metrics names no metric"),
        (("--metrics", "faithfulness,bleu"), "scores.jsonl", "unknown metric 'bleu'"),
        (("--k", "0"), "scores.jsonl", "--k must be at least 1, got 0"),
        (("--k", "-3"), "scores.jsonl", "--k must be at least 1, got -3"),
        (("--judge", "llm", "--concurrency", "0"), "scores.jsonl", "--concurrency must be at least 1, got 0"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(tmp_path, monkeypatch, capsys, extra, out_name, message):
    monkeypatch.setattr(files, "build_judge", _refuse_to_judge)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(FAITHFUL) + "\n")
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "a-folder.jsonl").mkdir()

    status = cli.main(["evaluate", "--input", str(source), "--out", str(tmp_path / out_name), *extra])

    stderr = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(stderr) == 1 and stderr[0].startswith("error: ") and message in stderr[0]
    assert source.read_text() == json.dumps(FAITHFUL) + "\n" and not (tmp_path / "scores.jsonl").exists()
