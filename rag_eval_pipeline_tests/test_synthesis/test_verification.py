"""Verification of synthetic QA: grounded, well-formed, distinct items are kept; others carry a reason."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.synthesis.generation import generate_offline, items_frame
from rag_eval_pipeline.synthesis.verification import verify_items

CHUNK_TEXTS = {
    "retention.md#0": "RouteWise API request logs are retained for 90 days and then deleted automatically.",
    "retention.md#1": "Database backups of the shipment system are kept for 35 days in a separate region.",
    "travel.md#0": "Flights must be booked at least 14 days before departure unless the trip is urgent.",
    "travel.md#1": "The hotel cap is EUR 230 per night in London, Paris, New York, Zurich and Singapore.",
    "oncall.md#0": "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday.",
}
CHUNK_IDS = set(CHUNK_TEXTS)


@pytest.fixture(scope="module")
def generated() -> pd.DataFrame:
    chunks = pd.DataFrame(
        [{"chunk_id": cid, "doc_id": cid.split("#")[0], "heading": "", "text": t} for cid, t in CHUNK_TEXTS.items()]
    )
    clusters = pd.DataFrame({"chunk_id": list(CHUNK_TEXTS), "cluster_id": [0, 0, 1, 1, 2], "membership": 1.0})
    frame = items_frame(generate_offline(chunks, clusters, {}, max_items=10))
    assert len(frame) == len(CHUNK_TEXTS)
    return frame


def _item(frame: pd.DataFrame, chunk_id: str) -> dict:
    return next(r for r in frame.to_dict("records") if r["gold_chunk_ids"] == [chunk_id])


def _verify(rows: list[dict], judge, chunk_ids=CHUNK_IDS):
    return verify_items(pd.DataFrame(rows), chunk_ids, judge)


def test_generated_items_are_all_kept(generated, offline_judge):
    kept, rejected = verify_items(generated, CHUNK_IDS, offline_judge)

    assert rejected.empty
    assert kept["qa_id"].tolist() == generated["qa_id"].tolist()
    assert list(kept.columns) == list(generated.columns)
    assert list(rejected.columns) == list(generated.columns) + ["reason"]


def test_ground_truth_with_a_changed_number_is_rejected(generated, offline_judge):
    item = _item(generated, "retention.md#0")
    changed = {**item, "qa_id": "changed", "ground_truth": item["ground_truth"].replace("90 days", "60 days")}
    assert changed["ground_truth"] != item["ground_truth"]

    kept, rejected = _verify([changed], offline_judge)

    assert kept.empty
    reason = rejected.set_index("qa_id").loc["changed", "reason"]
    assert "not supported by its gold chunks" in reason


def test_ground_truth_with_an_invented_claim_is_rejected(generated, offline_judge):
    item = _item(generated, "oncall.md#0")
    invented = {**item, "qa_id": "invented",
                "ground_truth": item["ground_truth"] + " Engineers on call receive a company car for the week."}

    kept, rejected = _verify([invented], offline_judge)

    assert kept.empty
    assert "company car" in rejected["reason"].iloc[0]


def test_ground_truth_checked_against_a_different_chunk_is_rejected(generated, offline_judge):
    item = _item(generated, "travel.md#0")
    wrong_context = {**item, "qa_id": "wrong", "gold_chunk_ids": ["oncall.md#0"],
                     "gold_contexts": [CHUNK_TEXTS["oncall.md#0"]]}

    kept, rejected = _verify([wrong_context], offline_judge)

    assert kept.empty
    assert "not supported" in rejected["reason"].iloc[0]


def test_unknown_gold_chunk_id_is_rejected(generated, offline_judge):
    item = _item(generated, "travel.md#1")
    unknown = {**item, "qa_id": "unknown", "gold_chunk_ids": ["travel.md#1", "travel.md#99"]}
    empty = {**item, "qa_id": "empty", "question": "What is the hotel cap in Zurich?", "gold_chunk_ids": []}

    kept, rejected = _verify([unknown, empty], offline_judge)

    assert kept.empty
    reasons = rejected.set_index("qa_id")["reason"]
    assert "gold chunk ids not among the chunks" in reasons["unknown"]
    assert "travel.md#99" in reasons["unknown"] and "travel.md#1'" not in reasons["unknown"]
    assert "none given" in reasons["empty"]


def test_duplicate_question_is_rejected_and_the_first_kept(generated, offline_judge):
    first = _item(generated, "oncall.md#0")
    # Same words, different case and punctuation: still the same question.
    duplicate = {**first, "qa_id": "dup", "question": "  " + first["question"].upper().replace('"', "'") + "  "}

    kept, rejected = _verify([first, duplicate], offline_judge)

    assert kept["qa_id"].tolist() == [first["qa_id"]]
    assert rejected["qa_id"].tolist() == ["dup"]
    assert rejected["reason"].iloc[0] == f"duplicate question of {first['qa_id']}"


def test_question_containing_its_answer_is_rejected(generated, offline_judge):
    item = _item(generated, "retention.md#1")
    leaking = {**item, "qa_id": "leak", "question": f"Is it true that {item['ground_truth'].lower()}"}

    kept, rejected = _verify([leaking], offline_judge)

    assert kept.empty
    assert rejected["reason"].iloc[0] == "question contains its own answer"


@pytest.mark.parametrize("question", ["Retention?", "How long?", " ".join(["word"] * 81) + "?"])
def test_question_length_out_of_bounds_is_rejected(generated, offline_judge, question):
    item = {**_item(generated, "retention.md#0"), "qa_id": "len", "question": question}

    kept, rejected = _verify([item], offline_judge)

    assert kept.empty
    assert "question length" in rejected["reason"].iloc[0]


def test_ground_truth_without_a_statement_is_rejected(generated, offline_judge):
    # Only stopwords: nothing a judge could check.
    item = {**_item(generated, "retention.md#0"), "qa_id": "vague", "ground_truth": "It is so."}

    kept, rejected = _verify([item], offline_judge)

    assert kept.empty
    assert "no checkable statement" in rejected["reason"].iloc[0]


def test_empty_ground_truth_is_rejected_for_having_no_answer(generated, offline_judge):
    item = {**_item(generated, "retention.md#0"), "qa_id": "blank", "ground_truth": ""}

    kept, rejected = _verify([item], offline_judge)

    assert kept.empty
    assert rejected["reason"].iloc[0] != "question contains its own answer"


def test_good_and_bad_items_are_partitioned_without_loss(generated, offline_judge):
    good = generated.to_dict("records")
    bad = [
        {**good[0], "qa_id": "bad-number", "question": "How long are RouteWise API request logs kept?",
         "ground_truth": good[0]["ground_truth"].replace("90", "9")},
        {**good[1], "qa_id": "bad-id", "question": "How long are database backups kept?", "gold_chunk_ids": ["nope#0"]},
    ]

    kept, rejected = _verify(bad[:1] + good + bad[1:], offline_judge)

    assert sorted(kept["qa_id"]) == sorted(r["qa_id"] for r in good)
    assert rejected["qa_id"].tolist() == ["bad-number", "bad-id"]
    assert rejected["reason"].str.len().gt(0).all()
