"""Prediction-powered inference: a metric's mean from many judge scores and a few human labels.

The judge scores every item (N scores f); people labelled n items the judge also scored (pairs f_i, y_i).
The judge's mean alone is biased by however the judge errs; the labels measure that error and correct it
(Angelopoulos et al., "Prediction-powered inference", Science 2023). The power-tuned form (PPI++,
Angelopoulos, Duchi and Zrnic 2023) weighs the judge by lambda in [0, 1]: 1 when the judge tracks the
labels closely, 0 when it says nothing about them (then the estimate is the labels' own mean).

    theta = lambda * mean(f over the N) + mean(y - lambda * f over the n)
    var   = lambda^2 * var(f) / N + var(y - lambda * f) / n

A small sample of labels may show no disagreement with the judge at all (on a judge right 94% of the
time, 25 labels do so one time in five): its error variance would be 0 and the interval would shrink to
the judge's own. The variance of the labelled errors is floored at that of a disagreement rate of
1 / (n + 2) (Laplace's rule of succession), so n labels never claim more than n labels can show.

The interval is valid when the labelled items are a random sample of the items the mean is over. A
difference of two means (a candidate against its baseline) keeps the judge's paired difference over the
items both runs measured and corrects each side by its labelled items: labels of that side's own commit
where there are enough, else the tenant's labels of any commit, assuming the judge errs on this commit
as on those. Where both sides are corrected by the same labels, the corrections cancel: the delta's
interval is then the judge's paired interval, and only the labels of a side's own commit can move it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Z_95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
MIN_LABELS = 10  # fewer labelled pairs than this give no interval: the variance estimate is too rough


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n_labels: int
    n_scored: int
    weight: float  # lambda: how far the judge's scores are trusted (1 classical PPI, 0 the labels alone)


def ppi_mean(scores: np.ndarray, labelled_scores: np.ndarray, labels: np.ndarray, tuned: bool = True) -> Interval:
    """The mean of the labels' quantity over the scored items, with its 95% interval; tuned: PPI++'s lambda,
    else the classical lambda = 1. Raises ValueError with fewer than MIN_LABELS pairs or no scores."""
    f, f_l, y = _arrays(scores), _arrays(labelled_scores), _arrays(labels)
    _check(f, f_l, y)
    n, big_n = len(y), len(f)
    weight = power_tuned_weight(f, f_l, y) if tuned else 1.0
    estimate = weight * f.mean() + (y - weight * f_l).mean()
    variance = weight**2 * _var(f) / big_n + _error_var(y - weight * f_l) / n
    return _interval(estimate, variance, n, big_n, weight)


def power_tuned_weight(scores: np.ndarray, labelled_scores: np.ndarray, labels: np.ndarray) -> float:
    """PPI++'s lambda for a mean: cov(y, f) / ((1 + n/N) var(f)), clipped to [0, 1]; 0 for a constant judge."""
    n, big_n = len(labels), len(scores)
    spread = _var(np.concatenate([scores, labelled_scores]))
    if spread <= 0:
        return 0.0
    covariance = float(np.cov(labels, labelled_scores, ddof=1)[0, 1]) if n > 1 else 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * spread), 0.0, 1.0))


def ppi_delta(
    paired_differences: np.ndarray, candidate_labels: dict[str, float], baseline_labels: dict[str, float]
) -> Interval:
    """Candidate mean minus baseline mean, corrected by labels. paired_differences: the judge's candidate
    minus baseline score per item measured by both. *_labels: {labelled item: y - f} of the items that
    correct each side; an item in both corrects both, so it cancels (in the estimate and the variance).
    Each side's errors keep their own variance, floored by that side's own n: ten labels of one commit
    never borrow the certainty of the tenant's hundreds."""
    d = _arrays(paired_differences)
    if len(d) == 0:
        raise ValueError("no item was measured on both sides")
    n_c, n_b = len(candidate_labels), len(baseline_labels)
    if min(n_c, n_b) < MIN_LABELS:
        raise ValueError(f"{min(n_c, n_b)} labelled items measured by the judge; PPI needs at least {MIN_LABELS}")
    var_c = _error_var(_arrays(list(candidate_labels.values())))
    var_b = _error_var(_arrays(list(baseline_labels.values())))
    errors_by_item = {**candidate_labels, **baseline_labels}
    correction, correction_var = 0.0, 0.0
    for key, error in errors_by_item.items():
        in_c, in_b = key in candidate_labels, key in baseline_labels
        weight = in_c / n_c - in_b / n_b  # the item's weight in (candidate correction - baseline correction)
        correction += weight * error
        correction_var += weight**2 * max(var_c if in_c else 0.0, var_b if in_b else 0.0)
    variance = _var(d) / len(d) + correction_var
    return _interval(float(d.mean()) + correction, variance, min(n_c, n_b), len(d), 1.0)


def _interval(estimate: float, variance: float, n: int, big_n: int, weight: float) -> Interval:
    half = Z_95 * float(np.sqrt(max(variance, 0.0)))
    return Interval(round(float(estimate), 4), round(estimate - half, 4), round(estimate + half, 4), n, big_n, weight)


def _arrays(values) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or not np.isfinite(array).all():
        raise ValueError("scores and labels must be finite numbers")
    return array


def _check(scores: np.ndarray, labelled_scores: np.ndarray, labels: np.ndarray) -> None:
    if len(labelled_scores) != len(labels):
        raise ValueError(f"{len(labelled_scores)} judge scores for {len(labels)} labels")
    if len(labels) < MIN_LABELS:
        raise ValueError(f"{len(labels)} labelled items measured by the judge; PPI needs at least {MIN_LABELS}")
    if len(scores) == 0:
        raise ValueError("no item was scored by the judge")


def _error_var(errors: np.ndarray) -> float:
    """The labelled errors' variance, at least that of a disagreement rate of 1 / (n + 2) on a 0/1 scale."""
    rate = 1 / (len(errors) + 2)
    return max(_var(errors), rate * (1 - rate))


def _var(values: np.ndarray) -> float:
    return float(values.var(ddof=1)) if len(values) > 1 else 0.0
