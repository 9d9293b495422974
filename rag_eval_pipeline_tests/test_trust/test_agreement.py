"""The agreement figures on cases worked by hand, and the vectorized resample measures against plain loops."""

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from rag_eval_pipeline.core.trust import agreement as ag
from rag_eval_pipeline.core.trust.agreement import NO_ITEM, NO_PAIR, agreement


def _values(result) -> dict:
    return {name: getattr(result, name).value for name in ag.FIGURES}


def test_a_perfect_judge_agrees_on_everything_at_the_threshold_between_the_classes():
    result = agreement([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0], ["a", "b", "a", "b"])
    assert _values(result) == {
        "accuracy_best": 1.0,
        "accuracy_at_half": 1.0,
        "kappa": 1.0,
        "roc_auc": 1.0,
        "pairwise": 1.0,
    }
    assert result.best_threshold == 0.5  # midway between 0.2 and 0.8
    assert (result.n, result.n_good, result.n_pairs, result.graded) == (4, 2, 2, False)


def test_an_inverted_judge_scores_zero_and_its_best_threshold_cannot_flip_it():
    result = agreement([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0], ["a", "b", "a", "b"])
    assert result.accuracy_at_half.value == 0.0
    assert result.kappa.value == -1.0
    assert result.roc_auc.value == 0.0
    assert result.pairwise.value == 0.0
    # "score >= t is good": the best any threshold does is to call every item good (half of them are).
    assert result.accuracy_best.value == 0.5 and result.best_threshold == 0.0


def test_a_constant_judge_has_kappa_0_and_auc_one_half():
    result = agreement([0.7] * 5, [1, 1, 1, 0, 0], ["p", "", "", "p", ""])
    assert result.kappa.value == 0.0
    assert result.roc_auc.value == 0.5
    assert result.accuracy_at_half.value == 0.6  # every item called good; 3 of 5 are
    assert result.pairwise.value == 0.5  # one pair id with good and bad: a tie counts half
    assert result.kappa.low == result.kappa.high == 0.0


def test_labels_of_one_class_leave_kappa_and_auc_undefined_with_the_reason_never_nan():
    result = agreement([0.3, 0.9, 0.6], [1, 1, 1])
    assert result.roc_auc.value is None and result.roc_auc.low is None
    assert result.roc_auc.note == "the labels hold one class only (every label is good)"
    assert result.kappa.value is None and "one class only" in result.kappa.note
    assert result.accuracy_at_half.value == pytest.approx(2 / 3, abs=1e-4)
    row = result.as_row()
    assert not [k for k, v in row.items() if isinstance(v, float) and math.isnan(v)]
    assert agreement([0.3, 0.1], [0, 0]).roc_auc.note == "the labels hold one class only (every label is bad)"


def test_auc_counts_ties_half():
    # good 0.5 and 0.9 against bad 0.2 and 0.5: 1 + 0.5 + 1 + 1 of 4
    assert agreement([0.2, 0.5, 0.5, 0.9], [0, 1, 0, 1]).roc_auc.value == 0.875


def test_kappa_by_hand():
    # predicted good, good, good, bad against 1, 1, 0, 0: p_o 3/4, p_e 0.75*0.5 + 0.25*0.5 = 0.5, kappa 0.5
    assert agreement([0.9, 0.9, 0.9, 0.1], [1, 1, 0, 0]).kappa.value == 0.5


def test_the_best_threshold_is_the_midpoint_that_maximises_accuracy():
    result = agreement([0.1, 0.3, 0.35, 0.8], [0, 0, 1, 1])
    assert result.accuracy_at_half.value == 0.75  # 0.35 is called bad at 0.5
    assert result.accuracy_best.value == 1.0 and result.best_threshold == 0.325


def test_when_calling_every_item_bad_does_best_there_is_no_threshold_and_it_says_so():
    result = agreement([0.9, 0.1, 0.2], [0, 0, 0])
    assert result.best_threshold is None
    assert result.accuracy_best.value == 1.0 and result.accuracy_best.note == ag.ALL_BAD_BEST


def test_pairwise_pools_every_good_bad_combination_with_ties_half_and_skips_one_sided_groups():
    scores = [0.8, 0.8, 0.9, 0.1, 0.2, 0.6, 0.7, 0.9]
    labels = [1, 0, 1, 0, 1, 0, 1, 1]
    pairs = ["a", "a", "b", "b", "c", "c", "d", "d"]  # d has no bad item
    result = agreement(scores, labels, pairs)
    assert result.pairwise.value == 0.5  # a: tie 0.5, b: 1, c: 0
    assert result.n_pairs == 3
    assert agreement(scores, labels).pairwise.note == NO_PAIR


def test_graded_labels_are_binarized_at_one_half():
    result = agreement([0.9, 0.1, 0.6], [0.7, 0.4, 0.5])
    assert result.graded and result.n_good == 2  # 0.7 and 0.5 are good
    assert result.accuracy_at_half.value == 1.0


def test_no_item_gives_no_figure_and_the_reason():
    result = agreement([], [])
    assert result.n == 0 and all(getattr(result, name).value is None for name in ag.FIGURES)
    assert result.kappa.note == NO_ITEM and result.pairwise.note == NO_PAIR


@pytest.mark.parametrize(
    "scores, labels, message",
    [
        ([1.2], [1], "every score must lie in [0, 1]"),
        ([0.5], [float("nan")], "every label"),
        ([0.5], [1, 0], "1 scores"),
    ],
)
def test_a_value_outside_0_1_or_a_length_mismatch_is_refused(scores, labels, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        agreement(scores, labels)


def test_intervals_are_reproducible_and_contain_the_estimate():
    rng = np.random.default_rng(3)
    scores = rng.random(120)
    labels = (rng.random(120) < scores).astype(float)
    pairs = [str(i // 2) for i in range(120)]
    first, again = agreement(scores, labels, pairs), agreement(scores, labels, pairs)
    assert first == again
    for name in ag.FIGURES:
        figure = getattr(first, name)
        assert figure.low is not None and figure.high is not None
        assert figure.low <= figure.value <= figure.high, name
        assert figure.high - figure.low > 0.02, name  # 120 noisy items: not a point
    assert agreement(scores, labels, pairs, seed=4).kappa != first.kappa  # the seed is what fixes it


# --- the resample measures (each row of weights a resample) against plain loops ------------------------


def _weights(n: int, rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 3, size=(rows, n)).astype(float)


def test_best_accuracy_rechooses_the_threshold_in_every_resample():
    rng = np.random.default_rng(5)
    s = np.round(rng.random(25), 1)  # ties
    good = rng.random(25) < 0.5
    weights = _weights(25, 40, 6)
    best, _ = ag._best_accuracy(s, good, weights)
    for row, w in zip(best, weights):
        thresholds = [*np.unique(s), np.inf]
        brute = max(float(w @ ((s >= t) == good)) for t in thresholds) / w.sum()
        assert row == pytest.approx(brute)


def test_auc_and_kappa_of_weighted_rows_match_sklearn_with_sample_weights():
    rng = np.random.default_rng(7)
    s = np.round(rng.random(30), 1)
    good = rng.random(30) < 0.4
    weights = _weights(30, 20, 8)
    aucs, kappas = ag._auc(s, good, weights), ag._kappa(s >= 0.5, good, weights)
    for auc, kappa, w in zip(aucs, kappas, weights):
        assert auc == pytest.approx(roc_auc_score(good, s, sample_weight=w))
        assert kappa == pytest.approx(cohen_kappa_score(good, s >= 0.5, sample_weight=w))


def test_a_rounding_error_below_zero_is_reported_as_zero_not_minus_zero():
    assert math.copysign(1.0, ag._rounded(-1e-12)) == 1.0  # "-0.000" in a table reads as a negative figure
