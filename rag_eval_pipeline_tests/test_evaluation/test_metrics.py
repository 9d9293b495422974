"""The metrics as pure functions of one item and the offline judge, and the MetricResult contract."""

from __future__ import annotations

import math

import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import OK, UNMEASURED, MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.builtin.hit_rate import hit_rate
from rag_eval_pipeline.core.metrics.builtin.mrr import mrr
from rag_eval_pipeline.core.metrics.formulas import average_precision
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
from rag_eval_pipeline.core.metrics.scoring import score_items

LOGS = "RouteWise API request logs are retained for 90 days and then deleted automatically."
SANDBOX = "The sandbox is limited to 60 requests per minute per client."
HOTEL = "The hotel cap is EUR 230 per night in London and Paris."
QUESTION = "How long are RouteWise API request logs retained?"

CONTEXTS = [
    {"id": "api.md#0", "text": f"{LOGS} {SANDBOX}"},
    {"id": "travel.md#3", "text": HOTEL},
]


def item(answer: str = LOGS, contexts=CONTEXTS, ground_truth: str = LOGS, gold=("api.md#0",), question=QUESTION):
    return EvalItem("qa-1", question, answer, [dict(c) for c in contexts], ground_truth, list(gold))


def ranked(*ids: str) -> list[dict]:
    return [{"id": i, "text": f"text of {i}"} for i in ids]


def score_item(example, judge, k=5, metrics=BUILTIN_METRICS):
    """One item through the engine the metric_scores asset uses: the judge's batch, then the formulas."""
    results, _ = score_items([example], judge, judge.embedder, metrics, k)
    return results[0]


def judged(metric: str, example, judge):
    return score_item(example, judge, metrics=(metric,))[0]


# --- retrieval: hit rate and MRR -------------------------------------------------------------


@pytest.mark.parametrize(
    "contexts, gold, k, expected_hit, expected_mrr",
    [
        (ranked("g", "b", "c", "d", "e"), ["g"], 5, 1.0, 1.0),  # gold at rank 1
        (ranked("a", "b", "g", "d", "e"), ["g"], 5, 1.0, 1 / 3),  # gold at rank 3
        (ranked("a", "b", "c", "d", "e"), ["g"], 5, 0.0, 0.0),  # gold absent
        (ranked("a", "b", "c", "g", "e"), ["g"], 3, 0.0, 0.0),  # gold at rank 4, cut off at k=3
        (ranked("a", "b", "c", "g", "e"), ["g"], 4, 1.0, 0.25),  # ... and inside k=4
        (ranked("a", "h", "c", "g"), ["g", "h"], 5, 1.0, 0.5),  # several gold ids: the first one found counts
        ([], ["g"], 5, 0.0, 0.0),  # nothing retrieved
    ],
)
def test_hit_rate_and_mrr_on_hand_made_rankings(contexts, gold, k, expected_hit, expected_mrr):
    example = EvalItem("q", "question?", "answer.", contexts, "", gold)

    hr, rr = hit_rate(example, k), mrr(example, k)

    assert (hr.status, rr.status) == (OK, OK)
    assert hr.score == expected_hit
    assert rr.score == pytest.approx(expected_mrr)


def test_mrr_evidence_gives_the_rank():
    example = EvalItem("q", "question?", "answer.", ranked("a", "b", "g"), "", ["g"])

    assert mrr(example, 5).evidence["first_relevant_rank"] == 3
    assert hit_rate(example, 2).evidence["retrieved"] == ["a", "b"]


@pytest.mark.parametrize("metric", [hit_rate, mrr])
def test_retrieval_metrics_are_unmeasured_without_gold_ids(metric):
    example = EvalItem("q", "question?", "answer.", ranked("a", "b"), "ground truth.", [])

    result = metric(example, 5)

    assert result.status == UNMEASURED
    assert result.score is None
    assert "gold" in result.reason


# --- average precision -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "relevant, expected",
    [
        ([1, 0, 1], (1 + 2 / 3) / 2),
        ([0, 1, 0], 1 / 2),
        ([0, 0, 1], 1 / 3),
        ([1, 1, 1], 1.0),
        ([1, 0, 0, 0], 1.0),
        ([0, 1, 1], (1 / 2 + 2 / 3) / 2),
        ([0, 0, 0], 0.0),
        ([], 0.0),
    ],
)
def test_average_precision_on_known_vectors(relevant, expected):
    assert average_precision(relevant) == pytest.approx(expected)


# --- faithfulness ----------------------------------------------------------------------------


def test_faithfulness_is_one_for_an_answer_copied_from_the_context(offline_judge):
    result = judged("faithfulness", item(answer=f"{LOGS} {SANDBOX}"), offline_judge)

    assert result.status == OK
    assert result.score == 1.0
    assert [s["verdict"] for s in result.evidence["statements"]] == [1, 1]


@pytest.mark.parametrize(
    "answer, note",
    [
        (LOGS.replace("90 days", "30 days"), "30"),
        (LOGS.replace("are retained", "are not retained"), "negation"),
        # "never" is caught as a word the context does not have, before the negation check runs
        (LOGS.replace("are retained", "are never retained"), "never"),
    ],
)
def test_faithfulness_drops_when_the_answer_contradicts_the_context(offline_judge, answer, note):
    result = judged("faithfulness", item(answer=answer), offline_judge)

    assert result.status == OK
    assert result.score == 0.0
    assert note in result.evidence["statements"][0]["note"]


def test_faithfulness_counts_an_unrelated_claim_against_the_answer(offline_judge):
    answer = f"{LOGS} The cafeteria serves vegetarian lasagne every Thursday afternoon."

    result = judged("faithfulness", item(answer=answer), offline_judge)

    assert result.score == pytest.approx(0.5)  # one of two statements is supported
    assert [s["verdict"] for s in result.evidence["statements"]] == [1, 0]


def test_faithfulness_without_contexts_is_zero(offline_judge):
    result = judged("faithfulness", item(contexts=[]), offline_judge)

    assert result.status == OK
    assert result.score == 0.0


@pytest.mark.parametrize("answer", ["", "   ", "\n"])
def test_faithfulness_is_unmeasured_for_an_empty_answer(offline_judge, answer):
    result = judged("faithfulness", item(answer=answer), offline_judge)

    assert result.status == UNMEASURED
    assert result.score is None
    assert result.reason


# --- context recall and precision -----------------------------------------------------------


def test_context_recall_counts_ground_truth_sentences_found_in_the_contexts(offline_judge):
    both = item(ground_truth=f"{LOGS} {HOTEL}")
    only_logs = item(ground_truth=f"{LOGS} {HOTEL}", contexts=CONTEXTS[:1])
    neither = item(ground_truth=f"{LOGS} {HOTEL}", contexts=[{"id": "x#0", "text": "Forklifts are inspected daily."}])

    assert judged("context_recall", both, offline_judge).score == 1.0
    assert judged("context_recall", only_logs, offline_judge).score == pytest.approx(0.5)
    assert judged("context_recall", neither, offline_judge).score == 0.0


def test_context_precision_rewards_relevant_chunks_ranked_first(offline_judge):
    relevant_first = judged("context_precision", item(contexts=CONTEXTS), offline_judge)
    relevant_second = judged("context_precision", item(contexts=list(reversed(CONTEXTS))), offline_judge)
    none_relevant = judged("context_precision", item(contexts=CONTEXTS[1:]), offline_judge)

    assert relevant_first.score == 1.0 and relevant_first.evidence["relevance"] == [1, 0]
    assert relevant_second.score == pytest.approx(0.5) and relevant_second.evidence["relevance"] == [0, 1]
    assert none_relevant.score == 0.0


@pytest.mark.parametrize("metric", ["context_recall", "context_precision"])
def test_context_metrics_are_unmeasured_without_a_ground_truth(offline_judge, metric):
    result = judged(metric, item(ground_truth=""), offline_judge)

    assert result.status == UNMEASURED and result.score is None and result.reason


# --- answer relevance ------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["I don't know.", "I do not know the answer.", "There is not enough information."])
def test_answer_relevance_is_zero_for_a_noncommittal_answer(offline_judge, answer):
    result = judged("answer_relevance", item(answer=answer), offline_judge)

    assert result.status == OK
    assert result.score == 0.0
    assert result.evidence.get("noncommittal") is True


def test_answer_relevance_is_zero_for_i_dont_know_with_a_typographic_apostrophe(offline_judge):
    result = judged("answer_relevance", item(answer="I don\u2019t know."), offline_judge)

    assert result.score == 0.0


def test_answer_relevance_prefers_an_on_topic_answer(offline_judge):
    on_topic = judged("answer_relevance", item(answer=LOGS), offline_judge)
    off_topic = judged(
        "answer_relevance", item(answer="The cafeteria serves vegetarian lasagne every Thursday."), offline_judge
    )

    assert on_topic.status == off_topic.status == OK
    assert 0.0 <= off_topic.score < on_topic.score <= 1.0
    assert on_topic.score > 0.5


def test_answer_relevance_is_unmeasured_for_an_empty_answer(offline_judge):
    result = judged("answer_relevance", item(answer="  "), offline_judge)

    assert result.status == UNMEASURED and result.reason == "empty answer"


# --- MetricResult contract -------------------------------------------------------------------


@pytest.mark.parametrize(
    "score, status, reason",
    [
        (float("nan"), OK, ""),
        (1.5, OK, ""),
        (-0.1, OK, ""),
        (float("inf"), OK, ""),
        (None, OK, ""),
        (None, UNMEASURED, ""),  # unmeasured must say why
        (0.5, UNMEASURED, "no gold"),  # unmeasured has no score
        (float("nan"), UNMEASURED, "x"),
        (0.5, "maybe", "x"),  # unknown status
    ],
)
def test_metric_result_refuses_invalid_results(score, status, reason):
    with pytest.raises(ValueError):
        MetricResult("faithfulness", score, status, reason)


def test_metric_result_accepts_the_bounds_and_helpers_build_valid_results():
    assert MetricResult("mrr", 0.0, OK).score == 0.0
    assert MetricResult("mrr", 1.0, OK).score == 1.0
    ok = measured("mrr", 1, k=5)
    assert ok.score == 1.0 and isinstance(ok.score, float) and ok.evidence == {"k": 5}
    missing = unmeasured("mrr", "no gold ids")
    assert (missing.status, missing.score, missing.reason) == (UNMEASURED, None, "no gold ids")
    with pytest.raises(ValueError):
        measured("mrr", math.nan)
    with pytest.raises(ValueError):
        unmeasured("mrr", "")


# --- score_item ------------------------------------------------------------------------------


def test_score_item_returns_every_metric_in_order(offline_judge):
    results = score_item(item(), offline_judge, k=1)

    assert [r.metric for r in results] == list(BUILTIN_METRICS)
    by_metric = {r.metric: r for r in results}
    assert by_metric["hit_rate"].evidence["k"] == 1
    assert by_metric["hit_rate"].score == 1.0
    assert by_metric["faithfulness"].score == 1.0
    assert all(r.status == OK for r in results)


def test_score_item_computes_only_the_requested_metrics(offline_judge):
    results = score_item(item(), offline_judge, metrics=("mrr", "context_recall"))

    assert [r.metric for r in results] == ["mrr", "context_recall"]


def test_score_item_rejects_unknown_metric_names(offline_judge):
    with pytest.raises(ValueError, match="bleu"):
        score_item(item(), offline_judge, metrics=("mrr", "bleu"))


@pytest.mark.parametrize(
    "answer", ["I don't know.", "I don\u2019t know.", "The context does not give enough information to answer."]
)
def test_a_noncommittal_answer_has_no_statement_to_verify(answer, offline_judge):
    result = judged("faithfulness", item(answer=answer), offline_judge)

    assert result.status == UNMEASURED
    assert "no statement" in result.reason
