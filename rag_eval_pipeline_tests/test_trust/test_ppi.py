"""Prediction-powered intervals: they correct a biased judge and cover the labels' mean at about 95%."""

import numpy as np
import pytest

from rag_eval_pipeline.core.trust.ppi import MIN_LABELS, ppi_delta, ppi_mean


def _population(rng, size=20_000):
    """Human labels y (a 0/1 quality) and a judge that is informative but biased upwards by 0.2."""
    y = (rng.random(size) < 0.6).astype(float)
    f = np.clip(0.5 * y + 0.4 + rng.normal(0, 0.15, size), 0, 1)
    return y, f


def _coverage(tuned: bool, n: int, trials: int = 400) -> tuple[float, float]:
    rng = np.random.default_rng(3)
    y, f = _population(rng)
    truth = y.mean()
    covered_ppi = covered_naive = 0
    for _ in range(trials):
        labelled = rng.choice(len(y), n, replace=False)
        scored = rng.choice(len(y), 400, replace=False)
        interval = ppi_mean(f[scored], f[labelled], y[labelled], tuned=tuned)
        covered_ppi += interval.low <= truth <= interval.high
        half = 1.96 * f[scored].std(ddof=1) / np.sqrt(len(scored))
        covered_naive += f[scored].mean() - half <= truth <= f[scored].mean() + half
    return covered_ppi / trials, covered_naive / trials


@pytest.mark.parametrize("tuned", [True, False], ids=["ppi++", "classical"])
@pytest.mark.parametrize("n", [25, 100])
def test_intervals_cover_the_true_mean_where_the_judges_own_interval_does_not(tuned, n):
    ppi, naive = _coverage(tuned, n)
    assert 0.9 <= ppi <= 0.99
    assert naive < 0.05  # the judge's bias (+0.2 on bad items) puts its own interval off the truth


def test_a_judge_that_says_nothing_gets_no_weight_and_the_labels_decide():
    rng = np.random.default_rng(0)
    labels = (rng.random(40) < 0.5).astype(float)
    interval = ppi_mean(np.full(500, 0.9), np.full(40, 0.9), labels)
    assert interval.weight == 0.0
    assert interval.estimate == pytest.approx(labels.mean(), abs=1e-4)


def test_an_exact_judge_is_trusted_fully_and_its_interval_is_narrow():
    rng = np.random.default_rng(1)
    f = rng.random(1000)
    interval = ppi_mean(f[:900], f[900:], f[900:])
    assert interval.weight == pytest.approx(1.0, abs=0.15)
    assert interval.high - interval.low < 0.06


def test_too_few_labels_or_unequal_lengths_are_refused():
    with pytest.raises(ValueError, match=f"at least {MIN_LABELS}"):
        ppi_mean(np.ones(50), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="judge scores for"):
        ppi_mean(np.ones(50), np.ones(12), np.ones(11))
    with pytest.raises(ValueError, match="finite"):
        ppi_mean(np.array([np.nan]), np.ones(12), np.ones(12))


def test_a_delta_corrected_by_the_same_labels_on_both_sides_is_the_judges_paired_delta():
    rng = np.random.default_rng(2)
    differences = rng.normal(-0.1, 0.2, 200)
    errors = {f"item{i}": e for i, e in enumerate(rng.normal(0.3, 0.1, 30))}
    shared = ppi_delta(differences, errors, errors)
    assert shared.estimate == pytest.approx(differences.mean(), abs=1e-4)
    half = 1.959963984540054 * differences.std(ddof=1) / np.sqrt(200)
    assert shared.high - shared.low == pytest.approx(2 * half, abs=2e-4)


def test_a_delta_corrected_by_each_sides_own_labels_moves_by_their_difference_and_widens():
    rng = np.random.default_rng(4)
    differences = rng.normal(0.0, 0.2, 200)
    candidate = {f"c{i}": e for i, e in enumerate(rng.normal(-0.2, 0.1, 30))}
    baseline = {f"b{i}": e for i, e in enumerate(rng.normal(0.1, 0.1, 30))}
    own = ppi_delta(differences, candidate, baseline)
    expected = differences.mean() + np.mean(list(candidate.values())) - np.mean(list(baseline.values()))
    assert own.estimate == pytest.approx(expected, abs=1e-4)
    same = ppi_delta(differences, candidate, candidate)
    assert own.high - own.low > same.high - same.low
    with pytest.raises(ValueError, match="at least"):
        ppi_delta(differences, candidate, dict(list(baseline.items())[:5]))


def test_labels_that_never_disagree_with_the_judge_still_leave_room_for_an_unseen_error():
    """25 labels, all equal to the judge's score: a judge wrong 6% of the time shows none one time in five."""
    scores = np.r_[np.ones(300), np.zeros(100)]
    interval = ppi_mean(scores, np.ones(25), np.ones(25), tuned=False)
    assert interval.estimate == pytest.approx(0.75, abs=1e-4)
    assert interval.high - interval.low > 0.1  # the labels' floor (rate 1/27), not the judge's 0.08 alone


def test_ten_labels_of_the_candidate_never_borrow_the_certainty_of_the_tenants_hundreds():
    """The candidate's side is corrected by its 10 own labels, the baseline's by all 310: the delta's
    interval is as wide as 10 labels allow, as wide as the candidate's own PPI mean."""
    rng = np.random.default_rng(5)
    differences = rng.normal(-0.15, 0.1, 200)
    own = {f"c{i}": 0.2 for i in range(10)}
    pooled = {**own, **{f"o{i}": e for i, e in enumerate(rng.normal(0.0, 0.1, 300))}}
    delta = ppi_delta(differences, own, pooled)
    mean = ppi_mean(np.full(200, 0.5), np.full(10, 0.5), np.full(10, 0.7), tuned=False)
    assert (delta.high - delta.low) >= 0.9 * (mean.high - mean.low)
    assert delta.low < -0.05  # it cannot rule out the judge's drop of 0.15 beyond a 0.05 tolerance
