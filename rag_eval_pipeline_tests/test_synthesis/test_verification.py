"""Verification of synthetic QA: grounded, well-formed, distinct items are kept; the others carry a stage and a reason."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.judgement import Failure, Judgement
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    MULTI_CONTEXT,
    REFUSAL,
    REJECTED_COLUMNS,
    SIMPLE,
    UNANSWERABLE,
    GenerationTask,
    SourceChunk,
    items_frame,
    make_item,
)
from rag_eval_pipeline.synthesis.quality import assess
from rag_eval_pipeline.synthesis.verification import VerificationSettings, verify_items

CHUNKS = {
    "retention.md#0": "RouteWise API request logs are retained for 90 days and then deleted automatically.",
    "retention.md#1": "Database backups of the shipment system are kept for 35 days in a separate region.",
    "retention.md#2": "Customer Shipment Data is retained for the duration of the contract plus 24 months.",
    "travel.md#0": "Flights must be booked at least 14 days before departure unless the trip is urgent.",
    "travel.md#1": "The hotel cap is EUR 230 per night in London, Paris, New York, Zurich and Singapore.",
    "oncall.md#0": "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday.",
    "sla.md#0": "A customer may ask Halcyon Freight to delete its Customer Shipment Data before the contract ends.",
    "safety.md#4": "A forklift certificate is valid for 3 years and must be renewed by passing a practical test.",
}
CHUNK_FRAME = pd.DataFrame(
    [
        {"chunk_id": c, "doc_id": c.split("#")[0], "position": int(c.split("#")[1]), "heading": "", "text": t}
        for c, t in CHUNKS.items()
    ]
)


def _source(chunk_id: str) -> SourceChunk:
    return SourceChunk(chunk_id, chunk_id.split("#")[0], chunk_id.split(".")[0].title(), "", CHUNKS[chunk_id])


def _record(question_type: str, chunk_ids: list[str], question: str, ground_truth: str) -> dict:
    task = GenerationTask(question_type, tuple(_source(c) for c in chunk_ids), 0)
    return items_frame([make_item(task, question, ground_truth, "test", "v1")]).iloc[0].to_dict()


GOOD = {
    "logs": _record(
        SIMPLE, ["retention.md#0"], "How long are RouteWise API request logs retained?", CHUNKS["retention.md#0"]
    ),
    "backups": _record(
        SIMPLE,
        ["retention.md#1"],
        "How long are database backups of the shipment system kept?",
        CHUNKS["retention.md#1"],
    ),
    "flights": _record(
        SIMPLE, ["travel.md#0"], "How many days before departure must flights be booked?", CHUNKS["travel.md#0"]
    ),
    "hotel": _record(SIMPLE, ["travel.md#1"], "What is the hotel cap per night?", CHUNKS["travel.md#1"]),
    "shift": _record(
        SIMPLE, ["oncall.md#0"], "How long does an on-call shift at Halcyon Freight last?", CHUNKS["oncall.md#0"]
    ),
    "multi": _record(
        MULTI_CONTEXT,
        ["retention.md#2", "sla.md#0"],
        'What do "Retention" and "Sla" each say about Customer Shipment Data?',
        f"{CHUNKS['retention.md#2']} {CHUNKS['sla.md#0']}",
    ),
    "absent": _record(
        UNANSWERABLE, ["safety.md#4"], "What was the total budget spent on forklift certificates last year?", REFUSAL
    ),
}


def _verify(rows: list[dict], judge, embedder, **settings):
    return verify_items(pd.DataFrame(rows), CHUNK_FRAME, judge, embedder, VerificationSettings(**settings))


def _bad(name: str, qa_id: str, **changes) -> dict:
    return {**GOOD[name], "qa_id": qa_id, **changes}


def _rejection(rejected: pd.DataFrame, qa_id: str) -> tuple[str, str]:
    row = rejected.set_index("qa_id").loc[qa_id]
    return row["stage"], row["reason"]


class FakeJudge:
    """A fake judge for the verification tests: returns the given ground-truth support for every item."""

    name = "fake"

    def __init__(self, support):
        self.support = support

    def judge_many(self, items, needs):
        return [Judgement(ground_truth_support=self.support) for _ in items]


# --- what is kept -----------------------------------------------------------------------------------


def test_well_formed_grounded_items_are_all_kept(offline_judge, embedder):
    rows = list(GOOD.values())

    kept, rejected = _verify(rows, offline_judge, embedder)

    assert rejected.empty, rejected[["qa_id", "stage", "reason"]].to_dict("records")
    assert kept["qa_id"].tolist() == [r["qa_id"] for r in rows]
    assert list(kept.columns) == GOLDEN_COLUMNS
    assert list(rejected.columns) == REJECTED_COLUMNS
    assert kept["grounded"].tolist() == [True] * len(rows)
    ranks = kept.set_index("qa_id")["round_trip_rank"]
    assert ranks[GOOD["absent"]["qa_id"]] == -1  # no gold chunk to find
    assert ranks.drop(GOOD["absent"]["qa_id"]).between(1, 5).all()


def test_round_trip_rank_is_the_rank_of_the_first_gold_chunk(offline_judge, embedder):
    off_topic = _bad("backups", "off-topic", question="Which flights must be booked well before the departure date?")
    rows = [GOOD["logs"], GOOD["multi"], GOOD["absent"], off_topic]

    everything, _ = _verify(rows, offline_judge, embedder, round_trip_k=len(CHUNKS))
    top_one, _ = _verify(rows, offline_judge, embedder, round_trip_k=1)

    everything, top_one = (
        everything.set_index("qa_id")["round_trip_rank"],
        top_one.set_index("qa_id")["round_trip_rank"],
    )
    # Every chunk is retrieved: each answerable item finds a gold chunk somewhere in 1..n, never 0.
    assert everything.drop(GOOD["absent"]["qa_id"]).between(1, len(CHUNKS)).all()
    assert everything["off-topic"] > 1
    # Top 1: 1 when the first hit is gold, 0 otherwise; -1 for items without gold chunks either way.
    assert top_one[GOOD["logs"]["qa_id"]] == 1
    assert top_one["off-topic"] == 0
    assert top_one[GOOD["absent"]["qa_id"]] == everything[GOOD["absent"]["qa_id"]] == -1


def test_a_retrieval_miss_is_rejected_only_when_configured(offline_judge, embedder):
    off_topic = _bad("backups", "off-topic", question="Which flights must be booked well before the departure date?")

    kept, rejected = _verify([GOOD["logs"], off_topic], offline_judge, embedder, round_trip_k=1)
    assert kept.set_index("qa_id").loc["off-topic", "round_trip_rank"] == 0 and rejected.empty

    kept, rejected = _verify(
        [GOOD["logs"], off_topic], offline_judge, embedder, round_trip_k=1, drop_on_retrieval_miss=True
    )
    assert kept["qa_id"].tolist() == [GOOD["logs"]["qa_id"]]
    assert _rejection(rejected, "off-topic") == ("retrieval", "no gold chunk in the reference retriever's top 1")


# --- form -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("question, words", [("Retention?", 1), ("How long?", 2), (" ".join(["word"] * 81) + "?", 81)])
def test_question_length_out_of_bounds_is_rejected(offline_judge, embedder, question, words):
    kept, rejected = _verify([_bad("logs", "len", question=question)], offline_judge, embedder)

    assert kept.empty
    assert _rejection(rejected, "len") == ("form", f"question has {words} words, outside 3-80")


def test_empty_or_overlong_ground_truth_is_rejected(offline_judge, embedder):
    rows = [_bad("logs", "blank", ground_truth=""), _bad("logs", "long", ground_truth=" ".join(["logs"] * 151) + ".")]

    _, rejected = _verify(rows, offline_judge, embedder)

    assert _rejection(rejected, "blank") == ("form", "ground truth has 0 words, outside 1-150")
    assert _rejection(rejected, "long") == ("form", "ground truth has 151 words, outside 1-150")


def test_an_unanswerable_item_must_expect_the_refusal(offline_judge, embedder):
    guess = _bad("absent", "guess", ground_truth="The budget was EUR 10,000.")

    kept, rejected = _verify([guess], offline_judge, embedder)

    assert kept.empty
    assert _rejection(rejected, "guess") == ("form", "an unanswerable item must expect the refusal as its answer")


# --- quality ----------------------------------------------------------------------------------------


def _llm_record(chunk_id: str, question: str, ground_truth: str, question_type: str = SIMPLE) -> dict:
    """An item as an LLM generator writes it: make_item with no template and no topic."""
    task = GenerationTask(question_type, (_source(chunk_id),), 0)
    return items_frame([make_item(task, question, ground_truth, "llm:fake", "llm-v1")]).iloc[0].to_dict()


LLM_GOOD = _llm_record(
    "retention.md#0", "For how many days are RouteWise API request logs kept?", CHUNKS["retention.md#0"]
)
LLM_MALFORMED = {
    "no question word": _llm_record(
        "retention.md#1", "The retention period of the shipment system backups?", CHUNKS["retention.md#1"]
    ),
    "its topic a pronoun": _llm_record(
        "travel.md#0", "What does the travel policy say about it?", CHUNKS["travel.md#0"]
    ),
    "words run together": _llm_record(
        "oncall.md#0", "How long does an oncallshiftathalcyonfreightlast in days?", CHUNKS["oncall.md#0"]
    ),
}


def test_malformed_llm_questions_are_rejected_at_the_quality_stage_with_their_reason(offline_judge, embedder):
    rows = [*LLM_MALFORMED.values(), LLM_GOOD]

    kept, rejected = _verify(rows, offline_judge, embedder)

    assert kept["qa_id"].tolist() == [LLM_GOOD["qa_id"]]
    assert sorted(rejected["qa_id"]) == sorted(r["qa_id"] for r in LLM_MALFORMED.values())
    for because, row in LLM_MALFORMED.items():
        stage, reason = _rejection(rejected, row["qa_id"])
        assert stage == "quality" and because in reason, (row["question"], reason)
    assert set(rejected["generator"]) == {"llm:fake"}


def test_kept_items_carry_their_quality_score(offline_judge, embedder):
    rows = [LLM_GOOD, *GOOD.values()]

    kept, _ = _verify(rows, offline_judge, embedder)

    assert "quality_score" in kept.columns and len(kept)
    scores = kept.set_index("qa_id")["quality_score"]
    assert scores.map(lambda s: isinstance(s, float) and 0.0 < s <= 1.0).all(), scores.to_dict()
    # The score is the quality stage's verdict on the question itself.
    assert scores[LLM_GOOD["qa_id"]] == assess(LLM_GOOD["question"], SIMPLE).score


def test_a_long_fill_in_the_blank_keeps_a_lower_score_than_a_plain_question(offline_judge, embedder):
    blank = _llm_record(
        "travel.md#0",
        'According to "Travel", what value fills the blank in "Flights must be booked at '
        'least ____ before departure unless the trip is urgent."?',
        CHUNKS["travel.md#0"],
    )

    kept, rejected = _verify([blank, GOOD["logs"]], offline_judge, embedder)

    assert rejected.empty, rejected[["stage", "reason"]].to_dict("records")
    scores = kept.set_index("qa_id")["quality_score"]
    assert scores[blank["qa_id"]] < scores[GOOD["logs"]["qa_id"]]


def test_a_section_name_as_an_unanswerable_topic_is_rejected_with_the_corpus_headings(offline_judge, embedder):
    task = GenerationTask(UNANSWERABLE, (_source("safety.md#4"),), 0)
    item = make_item(
        task,
        "What is the phone number of the person responsible for History?",
        REFUSAL,
        "offline-template",
        "template-v3",
        "absent-fact",
        "History",
    )
    chunks = CHUNK_FRAME.assign(heading=["History" if c == "safety.md#4" else "" for c in CHUNK_FRAME["chunk_id"]])

    kept, rejected = verify_items(items_frame([item]), chunks, offline_judge, embedder)

    assert kept.empty
    stage, reason = _rejection(rejected, item.qa_id)
    assert stage == "quality" and "section" in reason and "History" in reason


def test_quality_runs_after_form_and_before_the_gold_ids(offline_judge, embedder):
    malformed_and_unknown_gold = _bad(
        "logs", "both", question="The retention period of the request logs?", gold_chunk_ids=["nope#0"]
    )
    too_short_and_malformed = _bad("logs", "short", question="logs retained?")

    _, rejected = _verify([malformed_and_unknown_gold, too_short_and_malformed], offline_judge, embedder)

    assert _rejection(rejected, "both")[0] == "quality"
    assert _rejection(rejected, "short")[0] == "form"


def test_items_written_before_topics_were_recorded_are_still_verified(offline_judge, embedder):
    without_topic = pd.DataFrame([LLM_GOOD]).drop(columns=["topic"])

    kept, rejected = verify_items(without_topic, CHUNK_FRAME, offline_judge, embedder)

    assert rejected.empty and kept["qa_id"].tolist() == [LLM_GOOD["qa_id"]]
    assert 0.0 < kept["quality_score"].iloc[0] <= 1.0


# --- gold ids ---------------------------------------------------------------------------------------


def test_unknown_or_missing_gold_chunk_ids_are_rejected(offline_judge, embedder):
    unknown = _bad(
        "hotel",
        "unknown",
        gold_chunk_ids=["travel.md#1", "travel.md#99"],
        gold_contexts=[CHUNKS["travel.md#1"], "made up"],
    )
    empty = _bad("hotel", "empty", question="What is the hotel cap in Zurich?", gold_chunk_ids=[], gold_contexts=[])

    kept, rejected = _verify([unknown, empty], offline_judge, embedder)

    assert kept.empty
    stage, reason = _rejection(rejected, "unknown")
    assert stage == "gold_ids" and "travel.md#99" in reason and "travel.md#1'" not in reason
    assert _rejection(rejected, "empty") == ("gold_ids", "gold chunk ids not among the chunks: none given")


def test_an_unanswerable_item_with_gold_chunks_is_rejected(offline_judge, embedder):
    with_gold = _bad("absent", "with-gold", gold_chunk_ids=["safety.md#4"], gold_contexts=[CHUNKS["safety.md#4"]])

    _, rejected = _verify([with_gold], offline_judge, embedder)

    assert _rejection(rejected, "with-gold") == ("gold_ids", "an unanswerable item cannot have gold chunks")


def test_gold_contexts_must_be_the_texts_of_the_gold_chunks(offline_judge, embedder):
    # The context an item carries supports its answer, but it is not what chunk retention.md#0 says.
    forged = _bad(
        "logs",
        "forged",
        ground_truth="RouteWise API request logs are retained for 60 days.",
        gold_contexts=["RouteWise API request logs are retained for 60 days."],
    )

    kept, rejected = _verify([forged], offline_judge, embedder)

    assert kept.empty
    assert _rejection(rejected, "forged") == ("gold_ids", "gold contexts are not the texts of the gold chunks")


def test_the_cheapest_failing_check_gives_the_only_rejection(offline_judge, embedder):
    both = _bad("logs", "both", question="Why?", gold_chunk_ids=["nope#0"])

    _, rejected = _verify([both], offline_judge, embedder)

    assert len(rejected) == 1
    assert rejected["stage"].tolist() == ["form"]


# --- leak -------------------------------------------------------------------------------------------


def test_question_containing_its_answer_is_rejected(offline_judge, embedder):
    leaking = _bad("backups", "leak", question=f"Is it true that {CHUNKS['retention.md#1'].lower()[:-1]}?")

    kept, rejected = _verify([leaking], offline_judge, embedder)

    assert kept.empty
    assert _rejection(rejected, "leak") == ("leak", "the question already states its whole answer")


# --- grounding --------------------------------------------------------------------------------------


def test_ground_truth_with_a_changed_number_is_rejected(offline_judge, embedder):
    changed = _bad("logs", "changed", ground_truth=CHUNKS["retention.md#0"].replace("90 days", "60 days"))

    kept, rejected = _verify([changed], offline_judge, embedder)

    assert kept.empty
    stage, reason = _rejection(rejected, "changed")
    assert stage == "grounding" and "not supported by its gold chunks" in reason and "60 days" in reason


def test_ground_truth_with_an_invented_claim_is_rejected(offline_judge, embedder):
    invented = _bad(
        "shift",
        "invented",
        ground_truth=CHUNKS["oncall.md#0"] + " Engineers on call receive a company car for the week.",
    )

    kept, rejected = _verify([invented], offline_judge, embedder)

    assert kept.empty
    stage, reason = _rejection(rejected, "invented")
    assert stage == "grounding" and "company car" in reason


def test_ground_truth_checked_against_a_different_chunk_is_rejected(offline_judge, embedder):
    wrong = _bad("flights", "wrong", gold_chunk_ids=["oncall.md#0"], gold_contexts=[CHUNKS["oncall.md#0"]])

    kept, rejected = _verify([wrong], offline_judge, embedder)

    assert kept.empty
    stage, reason = _rejection(rejected, "wrong")
    assert stage == "grounding" and "not supported" in reason


def test_a_multi_context_answer_must_use_every_gold_chunk(offline_judge, embedder):
    # Supported (by the first chunk), but the second chunk contributes nothing to the answer.
    unused = _bad(
        "multi",
        "unused",
        question="What do the policies say about Customer Shipment Data and hotels?",
        ground_truth=CHUNKS["retention.md#2"],
        gold_chunk_ids=["retention.md#2", "travel.md#1"],
        gold_contexts=[CHUNKS["retention.md#2"], CHUNKS["travel.md#1"]],
    )

    kept, rejected = _verify([GOOD["multi"], unused], offline_judge, embedder)

    assert kept["qa_id"].tolist() == [GOOD["multi"]["qa_id"]]
    assert _rejection(rejected, "unused") == ("grounding", "the ground truth uses nothing from gold chunk travel.md#1")


def test_a_ground_truth_without_a_checkable_statement_is_rejected(offline_judge, embedder):
    vague = _bad("logs", "vague", ground_truth="I don't know the retention period.")

    _, rejected = _verify([vague], offline_judge, embedder)

    assert _rejection(rejected, "vague") == ("grounding", "the ground truth makes no checkable statement")


def test_a_judge_failure_rejects_with_the_judges_reason(embedder):
    _, rejected = _verify([GOOD["logs"], GOOD["absent"]], FakeJudge(Failure("server said 503")), embedder)

    # The unanswerable item is not sent to the judge: nothing to ground.
    assert rejected["qa_id"].tolist() == [GOOD["logs"]["qa_id"]]
    assert _rejection(rejected, GOOD["logs"]["qa_id"]) == (
        "grounding",
        "the judge could not check the ground truth: server said 503",
    )


# --- answerable -------------------------------------------------------------------------------------


def test_an_unanswerable_question_a_chunk_answers_is_rejected(offline_judge, embedder):
    answered = _bad("absent", "answered", question="Are RouteWise API request logs retained for 90 days?")

    kept, rejected = _verify([GOOD["absent"], answered], offline_judge, embedder)

    assert kept["qa_id"].tolist() == [GOOD["absent"]["qa_id"]]
    assert _rejection(rejected, "answered") == ("answerable", "chunk retention.md#0 may answer it")


# --- duplicates -------------------------------------------------------------------------------------


def test_a_near_duplicate_question_is_rejected_and_the_first_kept(offline_judge, embedder):
    first = GOOD["shift"]
    # Same words, different case and spacing: the same question to the embedding model. (Still ending in "?":
    # the quality stage, which runs first, rejects a question that does not.)
    twin = _bad("shift", "twin", question="  " + first["question"].upper().replace("?", " ?") + "  ")

    kept, rejected = _verify([first, twin, GOOD["logs"]], offline_judge, embedder)

    assert kept["qa_id"].tolist() == [first["qa_id"], GOOD["logs"]["qa_id"]]
    stage, reason = _rejection(rejected, "twin")
    assert stage == "duplicate" and reason.startswith(f"near-duplicate of {first['qa_id']} (cosine ")
    assert float(reason.split("cosine ")[1].rstrip(")")) >= 0.95


def test_near_duplicate_threshold_is_a_setting(offline_judge, embedder):
    # Two different questions about the same retention fact: distinct at 0.95, duplicates at a low threshold.
    other = _bad("logs", "other", question="For how many days does RouteWise keep its API request logs?")

    kept, _ = _verify([GOOD["logs"], other], offline_judge, embedder)
    assert len(kept) == 2

    kept, rejected = _verify([GOOD["logs"], other], offline_judge, embedder, near_duplicate_cosine=0.5)
    assert kept["qa_id"].tolist() == [GOOD["logs"]["qa_id"]]
    assert _rejection(rejected, "other")[0] == "duplicate"


def test_an_exact_repeat_of_a_qa_id_is_rejected_once(offline_judge, embedder):
    item = GOOD["hotel"]

    kept, rejected = _verify([item, dict(item)], offline_judge, embedder)

    assert kept["qa_id"].tolist() == [item["qa_id"]]
    assert rejected["qa_id"].tolist() == [item["qa_id"]]
    assert rejected["stage"].tolist() == ["duplicate"]
    assert rejected["reason"].tolist() == [f"same question and gold chunks as {item['qa_id']}"]
    assert list(rejected.columns) == REJECTED_COLUMNS


# --- nothing lost -----------------------------------------------------------------------------------


def test_good_and_bad_items_are_partitioned_without_loss(offline_judge, embedder):
    bad = [
        _bad(
            "logs",
            "bad-number",
            question="How long does RouteWise keep request logs?",
            ground_truth=CHUNKS["retention.md#0"].replace("90", "9"),
        ),
        _bad("backups", "bad-id", question="How long are database backups kept?", gold_chunk_ids=["nope#0"]),
        _bad("logs", "bad-form", question="Logs?"),
        _bad("absent", "bad-answerable", question="Are RouteWise API request logs retained for 90 days?"),
        dict(GOOD["flights"]),  # an exact repeat
    ]
    good = list(GOOD.values())
    rows = bad[:2] + good + bad[2:]

    kept, rejected = _verify(rows, offline_judge, embedder)

    assert sorted(kept["qa_id"]) == sorted(r["qa_id"] for r in good)
    assert sorted(kept["qa_id"].tolist() + rejected["qa_id"].tolist()) == sorted(r["qa_id"] for r in rows)
    assert dict(zip(rejected["qa_id"], rejected["stage"])) == {
        "bad-number": "grounding",
        "bad-id": "gold_ids",
        "bad-form": "form",
        "bad-answerable": "answerable",
        GOOD["flights"]["qa_id"]: "duplicate",
    }
    assert rejected["reason"].str.len().gt(0).all()
    assert list(kept.columns) == GOLDEN_COLUMNS and list(rejected.columns) == REJECTED_COLUMNS


def test_no_items_give_empty_tables_with_their_columns(offline_judge, embedder):
    kept, rejected = verify_items(items_frame([]), CHUNK_FRAME, offline_judge, embedder)

    assert kept.empty and rejected.empty
    assert list(kept.columns) == GOLDEN_COLUMNS and list(rejected.columns) == REJECTED_COLUMNS
