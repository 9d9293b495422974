"""Reading rows for `rag-eval evaluate`: line numbers, the size limit per field, fields that are not text,
keys and columns given twice, duplicate ids."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from rag_eval_pipeline.core.defaults import MAX_FIELD_CHARS
from rag_eval_pipeline.core.jsonl import iter_json_lines, read_json_lines
from rag_eval_pipeline.core.judging.results import measured
from rag_eval_pipeline.evaluation.tabular import (
    duplicate_ids,
    read_rows,
    results_frame,
    rows_from_frame,
    rows_from_records,
    to_items,
)

ROW = {
    "question": "How long do refunds take?",
    "contexts": ["Refunds take 14 days."],
    "answer": "14 days.",
    "ground_truth": "Refunds take 14 days.",
}


def test_unsupported_input_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unsupported format '.xlsx'"):
        read_rows(tmp_path / "data.xlsx")


def test_context_ids_must_match_contexts():
    frame = pd.DataFrame([{"question": "q?", "contexts": ["a", "b"], "context_ids": ["only-one"], "answer": "a"}])
    items, bad = to_items(rows_from_frame(frame))
    assert items == [] and bad[0].reason == "1 context ids for 2 contexts"


@pytest.mark.parametrize(
    "field, name",
    [
        ("question", "question"),
        ("answer", "answer"),
        ("ground_truth", "ground truth"),
        ("contexts", "context 2"),
    ],
)
def test_each_text_field_is_limited_and_the_reason_names_it(field, name):
    def row(size):
        text = "x" * size
        return {**ROW, field: ["short context", text] if field == "contexts" else text}

    items, bad = to_items(rows_from_frame(pd.DataFrame([row(MAX_FIELD_CHARS), row(MAX_FIELD_CHARS + 1)])))

    assert [number for number, _ in items] == [1]  # exactly at the limit is scored
    assert bad[0].row_number == 2
    assert (
        bad[0].reason
        == f"{name} is {MAX_FIELD_CHARS + 1:,} characters, over the limit of {MAX_FIELD_CHARS:,} per field"
    )


def test_rows_are_keyed_by_position_so_a_shared_id_keeps_each_rows_result(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps({**ROW, "id": "same", "answer": answer}) for answer in ("one.", "two.")))
    rows = read_rows(source)
    items, bad = to_items(rows)

    output = results_frame(rows, items, [[measured("mrr", 1.0)], [measured("mrr", 0.0)]], bad, ["mrr"])

    assert [item.answer for _, item in items] == ["one.", "two."]
    assert duplicate_ids(rows) == {"same": ["line 1", "line 2"]}
    assert output["id"].tolist() == ["same", "same"] and output["mrr"].tolist() == [1.0, 0.0]


def test_rows_without_an_id_are_not_duplicates_of_each_other():
    rows = rows_from_frame(pd.DataFrame([ROW, ROW, {**ROW, "id": ""}]))
    assert duplicate_ids(rows) == {}
    assert [row.row_id for row in rows] == ["1", "2", "3"]


def test_results_frame_of_no_rows_has_the_columns_and_no_nan():
    output = results_frame([], [], [], [], ["faithfulness"])
    assert list(output.columns) == ["id", "faithfulness", "faithfulness_status", "error"] and output.empty


# --- JSON Lines ---------------------------------------------------------------------------------


def test_a_line_separator_inside_a_json_string_does_not_split_the_line(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"answer": "one\u2028two\x85three"}, ensure_ascii=False) + "\n", encoding="utf-8")

    assert read_json_lines(source) == [{"answer": "one\u2028two\x85three"}]


def test_each_bad_line_is_reported_with_its_number_and_the_rest_still_read(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"a": 1}\n\n[1]\n{"b": \xff}\n{oops\n"text"\n{"c": 3}\n')

    lines = list(iter_json_lines(source))

    assert [(line.number, line.record) for line in lines if line.record] == [(1, {"a": 1}), (7, {"c": 3})]
    assert [(line.number, line.problem.split(" (")[0]) for line in lines if not line.record] == [
        (3, "expected a JSON object, got a JSON array"),
        (4, "not utf-8 text"),
        (5, "not valid JSON"),
        (6, "expected a JSON object, got a JSON string"),
    ]
    with pytest.raises(ValueError, match=r"in.jsonl line 3: expected a JSON object"):
        read_json_lines(source)


def test_a_byte_order_mark_is_not_a_bad_first_line(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n")

    rows = read_rows(source)

    assert [row.problem for row in rows] == [""] and rows[0].record["question"] == ROW["question"]


@pytest.mark.parametrize(
    "name, content", [("blank.jsonl", "\n  \n\t\n"), ("header.csv", "question,answer\n"), ("none.csv", "")]
)
def test_files_without_data_rows_have_no_rows(tmp_path, name, content):
    source = tmp_path / name
    source.write_text(content)
    assert read_rows(source) == []


# --- fields that are not text -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"question": ["a", "b"]}, "question is not text: a list"),
        ({"answer": {"a": 1}}, "answer is not text: a mapping"),
        ({"ground_truth": b"Refunds take 14 days."}, "ground truth is not text: bytes"),
        ({"answer": True}, "answer is not text: a boolean"),
        ({"contexts": [None]}, "context 1 is not text: null"),
        ({"contexts": ["Refunds take 14 days.", b"x"]}, "context 2 is not text: bytes"),
        ({"contexts": [["Refunds take 14 days."]]}, "context 1 is not text: a list"),
        ({"contexts": [{"id": "policy#0"}]}, "context 1 is not text: null"),
        ({"contexts": [{"id": "policy#0", "text": 3.5}]}, ""),  # a number is read as text
        ({"context_ids": [None]}, "context id 1 is not text: null"),
        ({"gold_chunk_ids": [["policy#0"]]}, "reference context id 1 is not text: a list"),
    ],
)
def test_a_field_that_is_not_text_makes_the_row_invalid(change, reason):
    """Nothing is turned into text by str(): ["a", "b"] would be scored as the question "['a', 'b']", and a
    context of None as an empty context measured at 0.0."""
    items, bad = to_items(rows_from_records([ROW, {**ROW, **change}]))

    assert [number for number, _ in items] == ([1] if reason else [1, 2])
    assert [(b.row_number, b.reason) for b in bad] == ([(2, reason)] if reason else [])


def test_numbers_are_read_as_text(tmp_path):
    """A column of numbers is a common answer column in CSV and Parquet files."""
    frame = pd.DataFrame(
        [
            {
                "question": "How many days do refunds take?",
                "contexts": ["Refunds take 14 days."],
                "answer": 14,
                "ground_truth": 14.5,
                "gold_chunk_ids": [7],
                "context_ids": [7],
            }
        ]
    )
    frame.to_parquet(tmp_path / "in.parquet")

    [(_, item)], bad = to_items(read_rows(tmp_path / "in.parquet"))

    assert bad == [] and (item.answer, item.ground_truth) == ("14", "14.5")
    assert item.gold_chunk_ids == ["7"] and item.contexts == [{"id": "7", "text": "Refunds take 14 days."}]


def test_absent_fields_are_empty_not_invalid(tmp_path):
    """A null answer (DeepEval's goldens write "actual_output": null) or an empty CSV cell is no answer."""
    items, bad = to_items(rows_from_records([{**ROW, "answer": None, "ground_truth": float("nan")}]))
    assert bad == [] and (items[0][1].answer, items[0][1].ground_truth) == ("", "")


# --- keys and columns given twice ----------------------------------------------------------------------


def test_a_jsonl_line_with_a_key_given_twice_is_invalid(tmp_path):
    """json.loads keeps the last of two equal keys: the row would be scored on one of two answers."""
    source = tmp_path / "in.jsonl"
    line = json.dumps(ROW)[:-1] + ', "answer": "45 days."}'
    source.write_text(json.dumps(ROW) + "\n" + line + "\n", encoding="utf-8")

    items, bad = to_items(read_rows(source))

    assert [number for number, _ in items] == [1]
    assert [(b.where, b.reason) for b in bad] == [("line 2", "duplicate key 'answer'")]


def test_a_json_item_with_a_key_given_twice_is_invalid(tmp_path):
    source = tmp_path / "cases.json"
    source.write_text(
        '[{"input": "How long do refunds take?", "actual_output": "14 days."},'
        ' {"input": "How long do refunds take?", "additional_metadata": {"qa_id": "a", "qa_id": "b"}}]',
        encoding="utf-8",
    )
    items, bad = to_items(read_rows(source))
    assert [number for number, _ in items] == [1]
    assert [(b.where, b.reason) for b in bad] == [("item 2", "duplicate key 'qa_id'")]


def test_a_csv_with_a_column_given_twice_is_refused(tmp_path):
    """pandas would rename the second `answer` to `answer.1`, which no one reads."""
    source = tmp_path / "in.csv"
    source.write_text('question,answer,contexts,answer\nHow long?,14 days.,"[""a""]",45 days.\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"in.csv names the column 'answer' twice") as raised:
        read_rows(source)
    assert "\n" not in str(raised.value)


def test_a_csv_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    source = tmp_path / "in.csv"
    pd.DataFrame([{"question": ROW["question"], "answer": ROW["answer"]}]).to_csv(
        source, index=False, encoding="utf-8-sig"
    )
    [(_, item)], bad = to_items(read_rows(source))
    assert bad == [] and item.question == ROW["question"]


# --- layering --------------------------------------------------------------------------------------------


def test_reading_rows_loads_neither_the_synthesis_nor_the_ingest_modules():
    """`rag-eval evaluate` and the Python API read rows through this module: the synthesis pipeline and the
    document ingest are not theirs to load."""
    probe = (
        "import json, sys\n"
        "import rag_eval_pipeline.evaluation.tabular\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('rag_eval_pipeline.synthesis', "
        "'rag_eval_pipeline.ingest')))))\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []
