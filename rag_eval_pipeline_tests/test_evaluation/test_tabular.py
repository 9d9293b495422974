"""Reading rows for `rag-eval evaluate`: line numbers, the size limit per field, duplicate ids."""

import json

import pandas as pd
import pytest

from rag_eval_pipeline.core.defaults import MAX_FIELD_CHARS
from rag_eval_pipeline.core.jsonl import iter_json_lines, read_json_lines
from rag_eval_pipeline.core.judging.results import measured
from rag_eval_pipeline.evaluation.tabular import duplicate_ids, read_rows, results_frame, rows_from_frame, to_items

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
