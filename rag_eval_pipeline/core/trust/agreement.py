"""How far a judge's scores agree with human labels: accuracy, Cohen's kappa, ROC-AUC and pairwise
agreement, each with a bootstrap 95% percentile interval. Numpy only; never NaN (an undefined figure is
None with its reason).

Scores s_i lie in [0, 1]; labels y_i are 0/1 or graded in [0, 1]. The classification measures read a
label as good when y >= 0.5 (graded labels are binarized there) and a score as good when s >= a threshold:

  accuracy@best   the share of items the judge classifies like the labels at the threshold that maximises it
                  on these labels (reported; a midpoint between two neighbouring scores)
  accuracy@0.5    the same at threshold 0.5
  kappa           Cohen's kappa at 0.5: (p_o - p_e) / (1 - p_e); 0 for a constant judge; undefined when the
                  labels hold one class only
  ROC-AUC         P(a good item scores above a bad one), ties half; undefined without both classes
  pairwise        over items sharing a pair id: the share of (good, bad) combinations where the good item
                  scores strictly above the bad one, ties half

Intervals resample the items (the pairs, for the pairwise figure) with a fixed seed, so the same scores
always give the same interval. The best threshold is chosen again inside each resample, so its interval
carries the optimism of choosing it on the labels it is measured on. A resample where a figure is
undefined (one class only) is left out of its interval; with fewer than half defined there is no interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LABEL_CUT = 0.5  # a label >= this is "good" for the classification measures
SCORE_CUT = 0.5  # the fixed threshold of accuracy@0.5 and kappa
RESAMPLES = 2000
SEED = 20240605  # the comparison's seed (reporting/compare.py): fixed, so an interval never moves
DECIMALS = 4
FIGURES = ("accuracy_best", "accuracy_at_half", "kappa", "roc_auc", "pairwise")
ONE_CLASS = "the labels hold one class only (every label is {})"
NO_ITEM = "no labelled item was measured"
NO_PAIR = "no pair id is shared by a good and a bad item"
FEW_RESAMPLES = "no interval: the figure is undefined in most resamples (too few items of one class)"
ALL_BAD_BEST = "no threshold beats calling every item bad"


@dataclass(frozen=True)
class Figure:
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""  # why the value or its interval is missing


@dataclass(frozen=True)
class Agreement:
    n: int  # items
    n_good: int  # items labelled good (y >= 0.5)
    graded: bool  # some label lies strictly between 0 and 1: binarized at 0.5
    best_threshold: float | None  # score >= it reads as good; None: calling every item bad did best
    accuracy_best: Figure
    accuracy_at_half: Figure
    kappa: Figure
    roc_auc: Figure
    pairwise: Figure
    n_pairs: int  # pair ids shared by at least one good and one bad item

    def as_row(self) -> dict:
        """Flat: n, n_good, graded, best_threshold, n_pairs, and per figure its value, _low, _high, _note."""
        row: dict = {
            "n": self.n,
            "n_good": self.n_good,
            "graded": self.graded,
            "best_threshold": self.best_threshold,
            "n_pairs": self.n_pairs,
        }
        for name in FIGURES:
            figure: Figure = getattr(self, name)
            row |= {name: figure.value, f"{name}_low": figure.low, f"{name}_high": figure.high}
            row[f"{name}_note"] = figure.note
        return row


def agreement(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    pair_ids: Sequence[str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Agreement:
    """Every figure with its interval; pair_ids: one per item ('' or None: in no pair)."""
    s, y = _checked(scores, labels)
    pairs = list(pair_ids) if pair_ids is not None else [""] * len(s)
    if len(pairs) != len(s):
        raise ValueError(f"{len(pairs)} pair ids for {len(s)} scores")
    good = y >= LABEL_CUT
    graded = bool(np.any((y > 0) & (y < 1)))
    pairwise, n_pairs = _pairwise(s, good, pairs, resamples, seed)
    if len(s) == 0:
        empty = Figure(None, note=NO_ITEM)
        return Agreement(0, 0, graded, None, empty, empty, empty, empty, pairwise, n_pairs)
    weights = np.vstack([np.ones(len(s)), _resample_counts(len(s), resamples, np.random.default_rng(seed))])
    best, threshold = _best_accuracy(s, good, weights)
    one_class = ONE_CLASS.format("good" if good.all() else "bad") if good.all() or not good.any() else ""
    return Agreement(
        n=len(s),
        n_good=int(good.sum()),
        graded=graded,
        best_threshold=threshold,
        accuracy_best=_figure(best, "", ALL_BAD_BEST if threshold is None else ""),
        accuracy_at_half=_figure(_accuracy(s >= SCORE_CUT, good, weights), ""),
        kappa=_figure(_kappa(s >= SCORE_CUT, good, weights), one_class),
        roc_auc=_figure(_auc(s, good, weights), one_class),
        pairwise=pairwise,
        n_pairs=n_pairs,
    )


def _checked(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(scores, dtype=float).reshape(-1), np.asarray(labels, dtype=float).reshape(-1)
    if len(s) != len(y):
        raise ValueError(f"{len(s)} scores for {len(y)} labels")
    for name, values in (("score", s), ("label", y)):
        outside = ~(np.isfinite(values) & (values >= 0) & (values <= 1))
        if outside.any():
            raise ValueError(
                f"every {name} must lie in [0, 1]; item {int(np.argmax(outside))} has {values[outside][0]}"
            )
    return s, y


def _resample_counts(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n): how many times each item is drawn in each resample."""
    drawn = rng.integers(0, n, size=(resamples, n))
    return np.stack([np.bincount(row, minlength=n) for row in drawn]).astype(float)


def _figure(values: np.ndarray, undefined: str, note: str = "") -> Figure:
    """values[0] is the point estimate, the rest the resamples; NaN marks an undefined figure."""
    point, rest = values[0], values[1:]
    if not np.isfinite(point):
        return Figure(None, note=undefined)
    defined = rest[np.isfinite(rest)]
    if len(defined) < len(rest) / 2 or len(defined) == 0:
        return Figure(_rounded(point), note=note or FEW_RESAMPLES)
    low, high = np.percentile(defined, [2.5, 97.5])
    return Figure(_rounded(point), _rounded(low), _rounded(high), note)


def _rounded(value) -> float:
    return round(float(value), DECIMALS) + 0.0  # + 0.0: a rounding error's -0.0 reads as 0.0


# --- the measures, over a matrix of item weights (row 0: every item once; the others: resamples) -------


def _accuracy(predicted_good: np.ndarray, good: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return weights @ (predicted_good == good) / weights.sum(axis=1)


def _kappa(predicted_good: np.ndarray, good: np.ndarray, weights: np.ndarray) -> np.ndarray:
    total = weights.sum(axis=1)
    observed = weights @ (predicted_good == good) / total
    p_pred, p_good = weights @ predicted_good / total, weights @ good / total
    chance = p_pred * p_good + (1 - p_pred) * (1 - p_good)
    one_class = (p_good == 0) | (p_good == 1)  # then chance == observed whatever the judge says
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(one_class, np.nan, (observed - chance) / (1 - chance))


def _sorted(s: np.ndarray, good: np.ndarray, weights: np.ndarray):
    """Items in score order; each item's weighted good and bad counts, and the cumulative counts before it."""
    order = np.argsort(s, kind="stable")
    w, g = weights[:, order], good[order]
    good_w, bad_w = w * g, w * ~g
    zero = np.zeros((len(w), 1))
    return s[order], good_w, bad_w, np.hstack([zero, good_w.cumsum(1)]), np.hstack([zero, bad_w.cumsum(1)])


def _auc(s: np.ndarray, good: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mann-Whitney: each good item counts the bad ones below it, and half those at its score."""
    ordered, good_w, _, _, bad_before = _sorted(s, good, weights)
    starts = np.searchsorted(ordered, ordered, side="left")  # first item of each item's tie group
    ends = np.searchsorted(ordered, ordered, side="right")
    below = bad_before[:, starts]
    tied = bad_before[:, ends] - below
    wins = (good_w * (below + 0.5 * tied)).sum(axis=1)
    pairs = good_w.sum(axis=1) * (weights.sum(axis=1) - good_w.sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pairs > 0, wins / pairs, np.nan)


def _best_accuracy(s: np.ndarray, good: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The best accuracy of each row over every cut of the sorted scores (items below it called bad), and
    the point estimate's threshold. A cut lies between two distinct scores, or before or after them all."""
    ordered, _, _, good_before, bad_before = _sorted(s, good, weights)
    n = len(ordered)
    cuts = np.flatnonzero(np.r_[True, ordered[1:] > ordered[:-1], True])  # cut j: items [0, j) called bad
    correct = bad_before[:, cuts] + (good_before[:, -1:] - good_before[:, cuts])
    best = correct.max(axis=1) / weights.sum(axis=1)
    return best, _threshold(ordered, cuts, correct[0], n)


def _threshold(ordered: np.ndarray, cuts: np.ndarray, correct: np.ndarray, n: int) -> float | None:
    """Among the cuts that do best, one that calls some item good, nearest to 0.5; None when only calling
    every item bad does best."""
    thresholds = np.array([0.0 if j == 0 else np.inf if j == n else (ordered[j - 1] + ordered[j]) / 2 for j in cuts])
    tied = np.flatnonzero((correct == correct.max()) & np.isfinite(thresholds))
    if len(tied) == 0:
        return None
    chosen = tied[np.argmin(np.abs(thresholds[tied] - SCORE_CUT))]
    return round(float(thresholds[chosen]), DECIMALS)


def _pairwise(s: np.ndarray, good: np.ndarray, pair_ids: list, resamples: int, seed: int) -> tuple[Figure, int]:
    """Pooled over every (good, bad) combination of each pair id; the interval resamples pair ids."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, pair_id in enumerate(pair_ids):
        if pair_id:
            groups[str(pair_id)].append(index)
    wins, counts = [], []
    for members in groups.values():
        good_scores = s[[i for i in members if good[i]]]
        bad_scores = s[[i for i in members if not good[i]]]
        if len(good_scores) and len(bad_scores):
            difference = good_scores[:, None] - bad_scores[None, :]
            wins.append(float((difference > 0).sum() + 0.5 * (difference == 0).sum()))
            counts.append(float(difference.size))
    if not counts:
        return Figure(None, note=NO_PAIR), 0
    rng = np.random.default_rng(seed + 1)  # its own stream: adding pairs does not move the items' intervals
    weights = np.vstack([np.ones(len(counts)), _resample_counts(len(counts), resamples, rng)])
    return _figure(weights @ np.array(wins) / (weights @ np.array(counts)), ""), len(counts)
