"""Property tests of the metric formulas and the regression comparison, over generated inputs.

No model is loaded: the formulas that need vectors get them from a fake embedder that hands out the
generated unit vectors, so the properties hold for any cosine a real model could produce.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Correctness, Failure, GeneratedQuestions, Judgement, Verdict
from rag_eval_pipeline.core.judging.results import OK, UNMEASURED
from rag_eval_pipeline.core.metrics.builtin.answer_correctness import CORRECTNESS_WEIGHTS, answer_correctness
from rag_eval_pipeline.core.metrics.builtin.answer_relevance import answer_relevance
from rag_eval_pipeline.core.metrics.builtin.context_precision import context_precision
from rag_eval_pipeline.core.metrics.builtin.context_recall import context_recall
from rag_eval_pipeline.core.metrics.builtin.contextual_relevancy import contextual_relevancy
from rag_eval_pipeline.core.metrics.builtin.faithfulness import faithfulness
from rag_eval_pipeline.core.metrics.builtin.hit_rate import hit_rate
from rag_eval_pipeline.core.metrics.builtin.mrr import mrr
from rag_eval_pipeline.core.metrics.formulas import average_precision
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
from rag_eval_pipeline.reporting.compare import PASSES, UNDECIDED, compare, decision

# Modest and without a deadline: the whole suite must stay fast on a shared two-core machine.
FAST = settings(max_examples=60, deadline=None, database=None)  # no example database left in the tree
COMPARE = settings(max_examples=30, deadline=None, database=None)  # each example bootstraps 2,000 resamples per metric

relevance = st.lists(st.integers(0, 1), max_size=15)
unit_scores = st.floats(0.0, 1.0, allow_nan=False)
vectors = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=3, max_size=3).filter(
    lambda v: np.linalg.norm(v) > 1e-3
)


def assert_valid(result) -> None:
    """A measured score is a finite number in [0, 1]; an unmeasured one has no score and a reason."""
    if result.status == OK:
        assert not math.isnan(result.score) and 0.0 <= result.score <= 1.0
    else:
        assert result.status == UNMEASURED and result.score is None and result.reason


def unit(vector) -> np.ndarray:
    return np.asarray(vector, dtype=float) / np.linalg.norm(vector)


class FakeEmbedder:
    """A fake: returns the given vectors, made unit-length as the real model's are, in call order."""

    def __init__(self, raw_vectors):
        self.vectors = [unit(v) for v in raw_vectors]

    def embed(self, texts):
        assert len(texts) == len(self.vectors)
        return np.stack(self.vectors)


# --- context precision: rank-aware average precision -----------------------------------------


def precision_at(relevant: list[int], k: int) -> float:
    return sum(relevant[:k]) / k


@FAST
@given(relevance)
def test_average_precision_is_the_mean_precision_at_each_relevant_rank(relevant):
    ranks = [k for k in range(1, len(relevant) + 1) if relevant[k - 1]]
    expected = sum(precision_at(relevant, k) for k in ranks) / len(ranks) if ranks else 0.0

    score = average_precision(relevant)

    assert 0.0 <= score <= 1.0 and not math.isnan(score)
    assert math.isclose(score, expected, abs_tol=1e-12)


@FAST
@given(relevance, relevance)
def test_moving_a_relevant_chunk_up_one_rank_raises_average_precision(above, below):
    assert average_precision(above + [1, 0] + below) > average_precision(above + [0, 1] + below)


@FAST
@given(relevance, st.integers(0, 10))
def test_average_precision_is_one_exactly_when_the_relevant_chunks_come_first(relevant, trailing):
    ranked_first = sorted(relevant, reverse=True)

    assert (average_precision(relevant) == 1.0) == (sum(relevant) > 0 and relevant == ranked_first)
    assert average_precision(relevant + [0] * trailing) == average_precision(relevant)  # misses below change nothing


@FAST
@given(st.integers(1, 30))
def test_a_single_relevant_chunk_at_rank_r_scores_one_over_r(rank):
    assert math.isclose(average_precision([0] * (rank - 1) + [1]), 1 / rank)


@FAST
@given(relevance)
def test_context_precision_reports_average_precision_of_the_judges_relevance(relevant):
    result = context_precision(Judgement(chunk_relevance=relevant))

    assert_valid(result)
    assert result.score == average_precision(relevant)
    assert context_precision(Judgement(chunk_relevance=Failure("judge timed out"))).status == UNMEASURED


# --- hit rate and MRR --------------------------------------------------------------------------

chunk_ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@FAST
@given(st.lists(chunk_ids, max_size=10), st.lists(chunk_ids, min_size=1, max_size=3), st.integers(1, 12))
def test_hit_rate_and_mrr_agree_with_the_first_gold_rank_within_k(retrieved, gold, k):
    example = EvalItem("q", "question?", "answer.", [{"id": i, "text": i} for i in retrieved], "", gold)
    first = next((rank for rank, i in enumerate(retrieved[:k], start=1) if i in gold), None)

    hit, reciprocal = hit_rate(example, k), mrr(example, k)
    wider_hit, wider_reciprocal = hit_rate(example, k + 1), mrr(example, k + 1)

    assert_valid(hit)
    assert_valid(reciprocal)
    assert hit.score == (1.0 if first else 0.0)
    assert reciprocal.score == (1 / first if first else 0.0)
    assert wider_hit.score >= hit.score and wider_reciprocal.score >= reciprocal.score  # a larger k never hurts


# --- shares of supported or relevant statements -------------------------------------------------


@FAST
@given(st.lists(st.integers(0, 1), max_size=12))
def test_statement_shares_are_the_supported_fraction_or_unmeasured(verdicts):
    judged = [Verdict(f"statement {i}.", v) for i, v in enumerate(verdicts)]
    results = [
        faithfulness(Judgement(answer_statements=judged)),
        context_recall(Judgement(ground_truth_support=judged)),
        contextual_relevancy(Judgement(context_relevance=judged)),
    ]
    for result in results:
        assert_valid(result)
        assert result.score == (sum(verdicts) / len(verdicts) if verdicts else None)


# --- metrics built on cosines ---------------------------------------------------------------------


@FAST
@given(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), vectors, vectors)
def test_answer_correctness_stays_in_bounds_for_any_counts_and_cosine(tp, fp, fn, answer_vector, truth_vector):
    example = EvalItem("q", "How long are logs kept?", "Logs are kept for 90 days.", [], "Logs are kept for 30 days.")
    correctness = Correctness(*([f"{kind} {i}" for i in range(n)] for kind, n in (("tp", tp), ("fp", fp), ("fn", fn))))
    embedder = FakeEmbedder([answer_vector, truth_vector])

    result = answer_correctness(example, Judgement(correctness=correctness), embedder)

    assert_valid(result)
    if tp + fp + fn == 0:
        assert result.status == UNMEASURED
    else:
        f1 = tp / (tp + 0.5 * (fp + fn))
        similarity = min(max(float(unit(answer_vector) @ unit(truth_vector)), 0.0), 1.0)  # cosines clipped at 0
        expected = CORRECTNESS_WEIGHTS[0] * f1 + CORRECTNESS_WEIGHTS[1] * similarity
        assert math.isclose(result.score, expected, abs_tol=1e-9)


@FAST
@given(vectors, st.lists(vectors, min_size=1, max_size=4))
def test_answer_relevance_stays_in_bounds_for_any_cosines(question_vector, generated_vectors):
    example = EvalItem("q", "How long are logs kept?", "Logs are kept for 90 days.")
    generated = GeneratedQuestions([f"generated {i}?" for i in range(len(generated_vectors))], noncommittal=False)

    embedder = FakeEmbedder([question_vector, *generated_vectors])

    result = answer_relevance(example, Judgement(generated_questions=generated), embedder)

    assert_valid(result)
    cosines = [min(max(float(unit(question_vector) @ unit(v)), 0.0), 1.0) for v in generated_vectors]
    assert result.status == OK and math.isclose(result.score, sum(cosines) / len(cosines), abs_tol=1e-9)


# --- the comparison -----------------------------------------------------------------------------


@st.composite
def score_tables(draw) -> pd.DataFrame:
    """Score rows as metric_scores writes them, with unmeasured items (score None) among them."""
    metrics = draw(st.lists(st.sampled_from(BUILTIN_METRICS), min_size=1, max_size=3, unique=True))
    n_items = draw(st.integers(1, 8))
    rows = []
    for metric in metrics:
        for i in range(n_items):
            score = draw(st.none() | unit_scores)
            rows.append(
                {
                    "qa_id": f"q{i}",
                    "metric": metric,
                    "score": score,
                    "status": "ok" if score is not None else "unmeasured",
                    "reason": "" if score is not None else "judge timed out",
                }
            )
    return pd.DataFrame(rows, columns=["qa_id", "metric", "score", "status", "reason"])


tolerances = st.floats(0.0, 0.3, allow_nan=False)


def measured_scores_mapped(scores: pd.DataFrame, change) -> pd.DataFrame:
    """The same table with `change` applied to every measured score; unmeasured items stay unmeasured."""
    return scores.assign(score=scores["score"].map(lambda s: None if pd.isna(s) else change(s)))


def assert_no_nan(table: pd.DataFrame) -> None:
    """Missing aggregates are <NA> with a note; a NaN would pass silently through comparisons."""
    for column in table.columns:
        assert not any(isinstance(v, float) and math.isnan(v) for v in table[column]), column


@COMPARE
@given(score_tables(), tolerances)
def test_a_candidate_identical_to_its_baseline_passes_exactly_when_measured_enough(scores, tolerance):
    comparison = compare(scores, scores.copy(), tolerance)

    assert comparison.failing_metrics == []
    assert decision(comparison.verdict) == (PASSES if _every_metric_measured_enough(scores) else UNDECIDED)
    assert_no_nan(comparison.table)
    assert all(d == 0 for d in comparison.table["delta"].dropna())


def _every_metric_measured_enough(scores: pd.DataFrame, floor: float = DEFAULT_MIN_COVERAGE) -> bool:
    shares = scores.groupby("metric")["score"].apply(lambda s: s.notna().mean())
    return bool((shares >= floor).all())


@COMPARE
@given(score_tables(), tolerances, st.floats(0.0, 1.0, allow_nan=False))
def test_raising_scores_never_blocks(scores, tolerance, gain):
    better = measured_scores_mapped(scores, lambda s: min(1.0, s + gain))

    verdict = compare(better, scores, tolerance).verdict
    assert decision(verdict) == (PASSES if _every_metric_measured_enough(scores) else UNDECIDED)


@COMPARE
@given(score_tables(), tolerances, st.floats(0.0, 0.5, allow_nan=False))
def test_a_drop_larger_than_the_tolerance_on_every_item_blocks(scores, tolerance, extra):
    # Baseline scores of at least 0.5 keep every item's drop above the tolerance even where 0 clips it.
    drop = tolerance + 0.001 + extra  # the 0.001 is beyond the 4-digit rounding of the means
    baseline = measured_scores_mapped(scores, lambda s: 0.5 + s / 2)
    worse = measured_scores_mapped(baseline, lambda s: max(0.0, s - drop))
    measured_metrics = set(baseline.loc[baseline["score"].notna(), "metric"])

    comparison = compare(worse, baseline, tolerance, min_coverage=0.0)  # the drop alone, whatever the coverage

    assert set(comparison.failing_metrics) == measured_metrics  # a metric nobody measured is not a regression
    assert_no_nan(comparison.table)


@COMPARE
@given(score_tables(), st.one_of(st.none(), score_tables()), tolerances)
def test_every_aggregate_is_bounded_and_never_nan(candidate, baseline, tolerance):
    table = compare(candidate, baseline, tolerance).table

    assert_no_nan(table)
    for column in ("candidate_mean", "baseline_mean", "coverage", "baseline_coverage"):
        assert all(0.0 <= v <= 1.0 for v in table[column].dropna()), column
    for column in ("delta", "delta_ci_low", "delta_ci_high"):
        assert all(-1.0 <= v <= 1.0 for v in table[column].dropna()), column
    assert all(low <= high for low, high in zip(table["delta_ci_low"].dropna(), table["delta_ci_high"].dropna()))
