"""Compare a candidate's scores with the tenant's baseline and decide whether to block.

Means are paired: a metric is compared over the golden items measured in both runs, so a change in
which items could be measured does not pass for a change in quality. Aggregates never contain NaN;
unmeasured items are counted instead, by cause (core/judging/results.py):

- items the metric does not apply to (no gold chunk, a declining answer, no context to judge) are left
  out of coverage;
- coverage is the share of the remaining items that were measured;
- a candidate that gives nothing to measure on more items than the baseline did (it failed, or
  answered nothing) regressed, even if the items it did answer score well;
- a metric measured on less than `min_coverage` of its items, on either side (a judge whose replies
  are unusable, a baseline that was never measured), is "unmeasured": not a pass and not a
  regression. The gate cannot decide on it and exits 2; a measured regression elsewhere still blocks.
- a verdict with no measured metric never passes.

Beside the verdict, the report explains where and why (`analyse`): a bootstrap interval of each
delta, the deltas per question type, retrieval/generation quadrants, and the worst regressed items.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE
from rag_eval_pipeline.core.judging.results import CANDIDATE, JUDGE, NOT_APPLICABLE, OK, unmeasured_cause
from rag_eval_pipeline.reporting import trust as judge_trust
from rag_eval_pipeline.reporting.trust import PPI_COLUMNS, JudgeTrust

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240605  # fixed: the same scores always give the same interval
WORST_ITEMS = 5
EVIDENCE_CHARS = 300

PASS = "pass"
BLOCK = "block"
NO_BASELINE = "no baseline"  # what the comparison says; the report says whether the candidate became the baseline
UNMEASURED = "unmeasured (the gate cannot decide: a metric was measured on too few items)"
NOTHING_SCORED = "unmeasured (no item was scored: the golden set or the candidate's outputs are empty)"
UNDECIDED_BY_PPI = (
    "undecided (a prediction-powered interval straddles a tolerance: more labels or items are needed to decide)"
)
# The report's verdict when there was no baseline: the candidate became it, or it did not (report.py).
BASELINE_PROPOSED = "pass (no baseline yet: this candidate is recorded as the baseline)"
NO_BASELINE_SET = (
    "no baseline (this golden-set version has none: the first passing gate on the followed branch, "
    "or `rag-eval baseline promote`, sets it)"
)

# What a verdict decides: the gate's exit 0, 1 or 2, and whether the blocking check passes.
PASSES, BLOCKS, UNDECIDED = "pass", "block", "undecided"


def decision(verdict: str) -> str:
    """PASSES, BLOCKS or UNDECIDED for a report's overall verdict (also one stored by an earlier version)."""
    if verdict == PASS or verdict == BASELINE_PROPOSED:
        return PASSES
    return BLOCKS if verdict.startswith(BLOCK) else UNDECIDED


# A metric's verdict, per row of the comparison.
OK_ROW, REGRESSED_ROW, UNMEASURED_ROW, NOT_APPLICABLE_ROW, NO_BASELINE_ROW, UNDECIDED_ROW = (
    "ok",
    "regressed",
    "unmeasured",
    "not applicable",
    "no baseline",
    "undecided",
)

Tolerance = float | dict[str, float]


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # one row per metric
    verdict: str
    failing_metrics: list[str]
    tolerance: float  # the default; per-metric values are in table["tolerance"]
    min_coverage: float = DEFAULT_MIN_COVERAGE
    decided_on: str = judge_trust.JUDGE  # the judge's own deltas, or their PPI intervals

    @property
    def unmeasured_metrics(self) -> list[str]:
        return self.table.loc[self.table["verdict"] == UNMEASURED_ROW, "metric"].tolist()

    @property
    def measured_enough(self) -> bool:
        """Every metric that applies was measured on at least min_coverage of the candidate's items (and
        something was measured at all): what a promotion needs on the candidate's side."""
        applies = self.table[self.table["verdict"] != NOT_APPLICABLE_ROW]
        return (
            bool(len(applies))
            and bool((applies["coverage"] >= self.min_coverage).all())
            and bool((applies["n_measured"] > 0).any())
        )


def compare(
    candidate: pd.DataFrame,
    baseline: pd.DataFrame | None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    trust: JudgeTrust | None = None,
    decide_on: str = judge_trust.JUDGE,
    commits: tuple[str, str] = ("", ""),
) -> Comparison:
    """tolerance: one value for every metric, or {metric: value} overrides (key "default" sets the rest).
    min_coverage: the least share of a metric's applicable items that must be measured, on each side.
    trust: the judge's calibration and labels on the tenant (reporting/trust.py), shown per metric;
    decide_on "ppi" decides judged metrics on their PPI intervals. commits: (candidate, baseline)."""
    if decide_on not in judge_trust.DECIDE_ON:
        raise ValueError(f"decide_on must be one of {judge_trust.DECIDE_ON}, got {decide_on!r}")
    default, overrides = _split_tolerance(tolerance)
    trust = trust or JudgeTrust()
    rows = []
    for metric, group in candidate.groupby("metric", sort=False):
        row = _metric_row(str(metric), group, baseline, overrides.get(str(metric), default), min_coverage)
        rows.append(_with_trust(row, group, baseline, trust, decide_on, commits))
    # Nullable floats: a metric nobody could measure has <NA> and a note, never NaN.
    table = pd.DataFrame(rows, columns=_COLUMNS).astype({column: "Float64" for column in _NULLABLE_COLUMNS})
    failing = table.loc[table["verdict"] == REGRESSED_ROW, "metric"].tolist()
    return Comparison(table, _overall(table, baseline is not None), failing, default, min_coverage, decide_on)


_BY_DELTA = "_decided_by_the_delta"  # a row's own key, not a column: only such a verdict may be re-decided


def _with_trust(row: dict, scores, baseline, trust: JudgeTrust, decide_on: str, commits) -> dict:
    """The row with the judge's calibration and PPI intervals; decided on the PPI delta when asked (a
    verdict that coverage or the candidate's missing answers decided stays)."""
    base_scores = None if baseline is None else baseline[baseline["metric"] == row["metric"]]
    paired = None if base_scores is None else _pairs(scores, base_scores)
    row.update(judge_trust.trust_columns(row["metric"], _measured(scores), paired, trust, commits))
    row["decided_on"] = judge_trust.JUDGE
    by_delta = row.pop(_BY_DELTA, False)
    if decide_on == judge_trust.PPI and by_delta:
        decided = judge_trust.decide_by_ppi(row, row["tolerance"])
        if decided is not None:
            row["verdict"], row["note"] = decided
            row["decided_on"] = judge_trust.PPI
    return row


def _overall(table: pd.DataFrame, has_baseline: bool) -> str:
    """A regression blocks; otherwise a metric measured on too few items leaves the gate undecided;
    a verdict with no measured metric never passes."""
    verdicts = set(table["verdict"])
    if REGRESSED_ROW in verdicts:  # also a candidate that failed on every item: failing is measured against it
        return BLOCK
    if table.empty or not (table["n_measured"] > 0).any() or verdicts <= {NOT_APPLICABLE_ROW}:
        return NOTHING_SCORED
    if UNMEASURED_ROW in verdicts:
        return UNMEASURED
    if UNDECIDED_ROW in verdicts:
        return UNDECIDED_BY_PPI
    return PASS if has_baseline else NO_BASELINE


class IncomparableScores(ValueError):
    """The baseline was scored differently (judge, k or metric set): its means say nothing about this candidate."""


def scoring_identity(scores: pd.DataFrame) -> dict[str, Any]:
    """What makes two score tables comparable: the judge (with its prompt version), k and the metric set."""

    def distinct(column: str) -> str:
        if column not in scores.columns:
            return "unrecorded"
        return ", ".join(sorted({str(v) for v in scores[column].dropna()})) or "unrecorded"

    return {"judge": distinct("judge"), "k": distinct("k"), "metrics": sorted({str(m) for m in scores["metric"]})}


def incomparable_reason(candidate: pd.DataFrame, baseline: pd.DataFrame) -> str | None:
    """Why the candidate's scores cannot be compared with the baseline's, or None when they can."""
    ours, theirs = scoring_identity(candidate), scoring_identity(baseline)
    differences = [
        f"{name}: candidate {_shown(ours[name])}, baseline {_shown(theirs[name])}"
        for name in ("judge", "k", "metrics")
        if ours[name] != theirs[name]
    ]
    return "; ".join(differences) or None


def _shown(value) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def _split_tolerance(tolerance: Tolerance) -> tuple[float, dict[str, float]]:
    if isinstance(tolerance, dict):
        overrides = {metric: float(value) for metric, value in tolerance.items() if metric != "default"}
        return float(tolerance.get("default", DEFAULT_TOLERANCE)), overrides
    return float(tolerance), {}


_NULLABLE_COLUMNS = (
    "candidate_mean",
    "coverage",
    "baseline_mean",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "baseline_coverage",
    *PPI_COLUMNS,
)
_COLUMNS = [
    "metric",
    "candidate_mean",
    "n_items",
    "n_applicable",
    "n_measured",
    "n_unmeasured",
    "coverage",
    "baseline_mean",
    "paired_items",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "baseline_coverage",
    "tolerance",
    "verdict",
    "note",
    "judge_calibration",
    *PPI_COLUMNS,
    "ppi_note",
    "decided_on",
]


@dataclass(frozen=True)
class Coverage:
    """How far one side's rows of one metric were measured, and why the rest were not (results.py's causes)."""

    items: int
    measured: int
    not_applicable: int
    candidate_short: int  # items the candidate gave nothing to measure on
    judge_failed: int
    reasons: dict[str, pd.Series]  # per cause: reason -> count, most frequent first

    @property
    def applicable(self) -> int:
        return self.items - self.not_applicable

    @property
    def share(self) -> float | None:
        """Measured items over applicable items; None when the metric applies to no item."""
        return round(self.measured / self.applicable, 4) if self.applicable else None

    @property
    def answered_share(self) -> float:
        """Applicable items the candidate gave something to measure on (measured or not by the judge)."""
        return round(1 - self.candidate_short / self.applicable, 4) if self.applicable else 1.0

    def why(self, *causes: str) -> str:
        """The most frequent reasons of these causes, with their counts."""
        found = [self.reasons[cause] for cause in causes if cause in self.reasons]
        if not found:
            return ""
        counts = pd.concat(found).groupby(level=0).sum().sort_values(ascending=False, kind="stable")
        top = [f"{reason} ({int(n)} item{'s' if n > 1 else ''})" for reason, n in counts.head(2).items()]
        return "; ".join(top) + (f"; {len(counts) - 2} other reasons" if len(counts) > 2 else "")


def coverage_of(scores: pd.DataFrame) -> Coverage:
    """What one metric's score rows say about how far it was measured."""
    unmeasured = scores[(scores["status"] != OK) | scores["score"].isna()]
    causes = unmeasured["reason"].fillna("").astype(str).map(unmeasured_cause)
    reasons = {cause: group.value_counts() for cause, group in unmeasured["reason"].astype(str).groupby(causes)}
    count = causes.value_counts()
    return Coverage(
        int(len(scores)),
        int(len(scores) - len(unmeasured)),
        int(count.get(NOT_APPLICABLE, 0)),
        int(count.get(CANDIDATE, 0)),
        int(count.get(JUDGE, 0)),
        reasons,
    )


def _metric_row(
    metric: str, scores: pd.DataFrame, baseline: pd.DataFrame | None, tolerance: float, min_coverage: float
) -> dict:
    ours = coverage_of(scores)
    row = {
        "metric": metric,
        "candidate_mean": _mean(_measured(scores)["score"]),
        "n_items": ours.items,
        "n_applicable": ours.applicable,
        "n_measured": ours.measured,
        "n_unmeasured": ours.items - ours.measured,
        "coverage": ours.share,
        "baseline_mean": None,
        "paired_items": 0,
        "delta": None,
        "delta_ci_low": None,
        "delta_ci_high": None,
        "baseline_coverage": None,
        "tolerance": tolerance,
    }
    if baseline is None:
        row["verdict"], row["note"] = _verdict_alone(ours, min_coverage)
        return row
    base_scores = baseline[baseline["metric"] == metric]
    theirs = coverage_of(base_scores)
    paired = _pairs(scores, base_scores)
    row["baseline_coverage"] = theirs.share
    row["paired_items"] = int(len(paired))
    candidate_mean, baseline_mean = _mean(paired["score"]), _mean(paired["score_baseline"])
    if candidate_mean is not None and baseline_mean is not None:  # some item was measured on both sides
        row["candidate_mean"], row["baseline_mean"] = candidate_mean, baseline_mean
        row["delta"] = round(candidate_mean - baseline_mean, 4)
        row["delta_ci_low"], row["delta_ci_high"] = bootstrap_interval(paired["score"] - paired["score_baseline"])
    row["verdict"], row["note"] = _verdict_against(ours, theirs, row["delta"], tolerance, min_coverage)
    row[_BY_DELTA] = row["verdict"] in (OK_ROW, REGRESSED_ROW) and not _answered_drop(ours, theirs, tolerance)
    return row


def _answered_drop(ours: Coverage, theirs: Coverage, tolerance: float) -> bool:
    """The candidate gave nothing to measure on more items than the baseline did, by more than the tolerance."""
    return round(theirs.answered_share - ours.answered_share, 4) > tolerance  # 1.0 - 0.95 is not > 0.05


def _verdict_alone(ours: Coverage, min_coverage: float) -> tuple[str, str]:
    """A metric of a candidate without a baseline: measured enough to become one, or not."""
    if ours.share is None:  # no item the metric applies to
        return NOT_APPLICABLE_ROW, f"applies to none of the items: {ours.why(NOT_APPLICABLE)}"
    if ours.share < min_coverage:
        return UNMEASURED_ROW, _too_few("candidate", ours, min_coverage)
    return NO_BASELINE_ROW, ours.why(CANDIDATE, JUDGE)


def _verdict_against(
    ours: Coverage, theirs: Coverage, delta: float | None, tolerance: float, min_coverage: float
) -> tuple[str, str]:
    """In this order: a metric that applies to nothing; the candidate giving nothing to measure on more items
    than the baseline did (a regression: failing is the candidate's doing); either side measured on too few
    items (undecided: not a pass, and not the candidate's fault); the mean dropping by more than the tolerance."""
    if not ours.applicable:
        return NOT_APPLICABLE_ROW, f"applies to none of the candidate's items: {ours.why(NOT_APPLICABLE)}"
    if not theirs.applicable:  # nothing to compare with, so nothing can have regressed: it does not gate
        return NO_BASELINE_ROW, f"applies to none of the baseline's items: {theirs.why(NOT_APPLICABLE)}"
    if _answered_drop(ours, theirs, tolerance):
        return REGRESSED_ROW, (
            f"the candidate gave nothing to measure on {ours.candidate_short} of {ours.applicable} "
            f"items (the baseline on {theirs.candidate_short}): {ours.why(CANDIDATE)}"
        )
    short = [
        _too_few(side, cover, min_coverage)
        for side, cover in (("candidate", ours), ("baseline", theirs))
        if cover.share is None or cover.share < min_coverage
    ]
    if short:
        return UNMEASURED_ROW, "; ".join(short)
    if delta is None:
        return UNMEASURED_ROW, "no item was measured on both sides"
    return (REGRESSED_ROW if delta < -tolerance else OK_ROW), ours.why(CANDIDATE, JUDGE)


def _too_few(side: str, cover: Coverage, min_coverage: float) -> str:
    if not cover.applicable:
        return f"{side}: applies to none of its items"
    return (
        f"{side} measured on {cover.measured} of {cover.applicable} items ({cover.share:.0%}, floor "
        f"{min_coverage:.0%}): {cover.why(JUDGE, CANDIDATE)}"
    )


def bootstrap_interval(
    differences: pd.Series, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float | None, float | None]:
    """Paired bootstrap 95% interval of the mean difference; (None, None) without pairs.

    Resampling the per-item differences (not the two runs separately) keeps the pairing, so item
    difficulty, which both runs share, does not widen the interval.
    """
    values = differences.dropna().to_numpy(dtype=float)
    if len(values) == 0:
        return None, None
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


def _measured(scores: pd.DataFrame) -> pd.DataFrame:
    return scores[(scores["status"] == OK) & scores["score"].notna()]


def _pairs(candidate: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Items measured in both runs, with the baseline's columns suffixed '_baseline'."""
    return _measured(candidate).merge(_measured(baseline), on=["qa_id", "metric"], suffixes=("", "_baseline"))


def _mean(values: pd.Series) -> float | None:
    values = values.dropna()
    return round(float(values.mean()), 4) if len(values) else None


# --- Where and why: the analyses shown beside the verdict -------------------------------------------


@dataclass(frozen=True)
class Analysis:
    breakdown: pd.DataFrame  # per (question_type, metric): means, delta, n
    quadrants: pd.DataFrame  # per run: items in each retrieval x generation quadrant
    stage_summary: str  # which stage regressed, in one sentence
    worst: pd.DataFrame  # the items whose score dropped most, with answers and evidence
    worst_basis: list[str] = field(default_factory=list)  # the metrics the worst items are ranked on


def analyse(
    comparison: Comparison,
    candidate: pd.DataFrame,
    baseline: pd.DataFrame | None,
    golden: pd.DataFrame | None = None,
    outputs: pd.DataFrame | None = None,
    baseline_outputs: pd.DataFrame | None = None,
) -> Analysis:
    basis = comparison.failing_metrics or ["answer_correctness"]
    return Analysis(
        breakdown=breakdown_by_type(candidate, baseline, golden),
        quadrants=quadrant_counts(candidate, baseline),
        stage_summary=stage_summary(candidate, baseline),
        worst=worst_items(candidate, baseline, basis, golden, outputs, baseline_outputs),
        worst_basis=basis,
    )


BREAKDOWN_COLUMNS = ["question_type", "metric", "candidate_mean", "baseline_mean", "delta", "n"]


def breakdown_by_type(
    candidate: pd.DataFrame, baseline: pd.DataFrame | None, golden: pd.DataFrame | None
) -> pd.DataFrame:
    """Per (question_type, metric): means over the items measured in both runs (or in the candidate
    alone without a baseline), their delta, and n, the number of those items."""
    if golden is None or candidate.empty:
        return _float_frame(pd.DataFrame(columns=BREAKDOWN_COLUMNS))
    types = golden.set_index("qa_id")["question_type"]
    if baseline is None:
        scored = _measured(candidate).assign(score_baseline=np.nan)
    else:
        scored = _pairs(candidate, baseline)
    scored = scored.assign(question_type=scored["qa_id"].map(types).fillna("unknown"))
    rows = []
    for (question_type, metric), group in scored.groupby(["question_type", "metric"], sort=True):
        candidate_mean, baseline_mean = _mean(group["score"]), _mean(group["score_baseline"])
        both = candidate_mean is not None and baseline_mean is not None
        delta = round(candidate_mean - baseline_mean, 4) if both else None  # type: ignore[operator]
        rows.append([question_type, metric, candidate_mean, baseline_mean, delta, int(len(group))])
    return _float_frame(pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS))


def _float_frame(frame: pd.DataFrame) -> pd.DataFrame:
    floats = [c for c in frame.columns if c.endswith("_mean") or c in ("delta", "drop") or c.endswith("_score")]
    return frame.astype({c: "Float64" for c in floats})


# Quadrants: an item's retrieval is good when hit_rate == 1 (a gold chunk is in the top k); when hit
# rate is unmeasured (e.g. unanswerable questions have no gold chunk), when context_recall >= 0.5.
# Its generation is good when faithfulness >= 0.5 and answer_correctness >= 0.5, bad when either
# measured one is below 0.5. An item missing what a rule needs is "unclassified" for that stage.
GOOD, BAD, UNCLASSIFIED = "good", "bad", "unclassified"
THRESHOLD = 0.5
QUADRANT_COLUMNS = ["run", "retrieval", "generation", "n"]


def item_stages(scores: pd.DataFrame) -> pd.DataFrame:
    """Per qa_id: retrieval and generation, each good, bad or unclassified."""
    measured = _measured(scores).pivot_table(index="qa_id", columns="metric", values="score", aggfunc="first")
    rows = [
        {"qa_id": qa_id, "retrieval": _retrieval(measured.loc[qa_id]), "generation": _generation(measured.loc[qa_id])}
        for qa_id in measured.index
    ]
    unscored = sorted(set(scores["qa_id"]) - set(measured.index))
    rows += [{"qa_id": qa_id, "retrieval": UNCLASSIFIED, "generation": UNCLASSIFIED} for qa_id in unscored]
    return pd.DataFrame(rows, columns=["qa_id", "retrieval", "generation"])


def _retrieval(item: pd.Series) -> str:
    if pd.notna(item.get("hit_rate")):
        return GOOD if item["hit_rate"] >= 1.0 else BAD
    if pd.notna(item.get("context_recall")):
        return GOOD if item["context_recall"] >= THRESHOLD else BAD
    return UNCLASSIFIED


def _generation(item: pd.Series) -> str:
    values = [item.get(metric) for metric in ("faithfulness", "answer_correctness")]
    known = [v for v in values if pd.notna(v)]
    if any(v < THRESHOLD for v in known):
        return BAD
    return GOOD if len(known) == 2 else UNCLASSIFIED


def quadrant_counts(candidate: pd.DataFrame, baseline: pd.DataFrame | None) -> pd.DataFrame:
    """Items per (run, retrieval, generation); every combination is listed, with n = 0 if empty."""
    runs = {"candidate": candidate} if baseline is None else {"candidate": candidate, "baseline": baseline}
    rows = []
    for run, scores in runs.items():
        counts = item_stages(scores).groupby(["retrieval", "generation"]).size()
        for retrieval in (GOOD, BAD, UNCLASSIFIED):
            for generation in (GOOD, BAD, UNCLASSIFIED):
                rows.append([run, retrieval, generation, int(counts.get((retrieval, generation), 0))])
    return pd.DataFrame(rows, columns=QUADRANT_COLUMNS)


def stage_transitions(candidate: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per stage: items that went good -> bad ("worse") and bad -> good ("better") from baseline to candidate."""
    both = item_stages(baseline).merge(item_stages(candidate), on="qa_id", suffixes=("_baseline", "_candidate"))
    return {
        stage: {
            "worse": int(((both[f"{stage}_baseline"] == GOOD) & (both[f"{stage}_candidate"] == BAD)).sum()),
            "better": int(((both[f"{stage}_baseline"] == BAD) & (both[f"{stage}_candidate"] == GOOD)).sum()),
        }
        for stage in ("retrieval", "generation")
    }


def stage_summary(candidate: pd.DataFrame, baseline: pd.DataFrame | None) -> str:
    if baseline is None:
        return "No baseline: no stage can have regressed yet."
    moves = stage_transitions(candidate, baseline)
    net = {stage: counts["worse"] - counts["better"] for stage, counts in moves.items()}
    detail = "; ".join(
        f"{stage}: {counts['worse']} item(s) good -> bad, {counts['better']} bad -> good"
        for stage, counts in moves.items()
    )
    if max(net.values()) <= 0:
        return f"Neither stage regressed ({detail})."
    if net["retrieval"] == net["generation"]:
        return f"Retrieval and generation regressed alike ({detail})."
    worst = max(net, key=lambda stage: net[stage])
    return f"{worst.capitalize()} regressed most ({detail})."


WORST_COLUMNS = [
    "qa_id",
    "metric",
    "question_type",
    "question",
    "baseline_score",
    "candidate_score",
    "drop",
    "baseline_answer",
    "candidate_answer",
    "evidence",
    "trace_id",  # the candidate's judge span of the item (core/tracing.py): "" when tracing was off
    "span_id",
]


def worst_items(
    candidate: pd.DataFrame,
    baseline: pd.DataFrame | None,
    metrics: list[str],
    golden: pd.DataFrame | None = None,
    outputs: pd.DataFrame | None = None,
    baseline_outputs: pd.DataFrame | None = None,
    limit: int = WORST_ITEMS,
) -> pd.DataFrame:
    """The `limit` items whose score fell most on one of `metrics` (each item once, at its largest
    drop), largest drop first, with the question, both answers and the candidate's judge evidence."""
    if baseline is None:
        return _float_frame(pd.DataFrame(columns=WORST_COLUMNS))
    pairs = _pairs(candidate[candidate["metric"].isin(metrics)], baseline)
    pairs = pairs.assign(drop=(pairs["score_baseline"] - pairs["score"]).round(4))
    pairs = pairs[pairs["drop"] > 0].sort_values(["drop", "qa_id", "metric"], ascending=[False, True, True])
    pairs = pairs.drop_duplicates("qa_id").head(limit)
    gold = golden.set_index("qa_id") if golden is not None else None
    rows = [
        {
            "qa_id": pair["qa_id"],
            "metric": pair["metric"],
            "question_type": _lookup(gold, pair["qa_id"], "question_type"),
            "question": _lookup(gold, pair["qa_id"], "question")
            or _lookup(_indexed(outputs), pair["qa_id"], "question"),
            "baseline_score": pair["score_baseline"],
            "candidate_score": pair["score"],
            "drop": pair["drop"],
            "baseline_answer": _lookup(_indexed(baseline_outputs), pair["qa_id"], "answer"),
            "candidate_answer": _lookup(_indexed(outputs), pair["qa_id"], "answer"),
            "evidence": _short_evidence(pair.get("evidence")),
            "trace_id": str(pair.get("trace_id") or ""),
            "span_id": str(pair.get("span_id") or ""),
        }
        for pair in pairs.to_dict("records")
    ]
    return _float_frame(pd.DataFrame(rows, columns=WORST_COLUMNS))


def _indexed(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    return frame.drop_duplicates("qa_id").set_index("qa_id") if frame is not None else None


def _lookup(frame: pd.DataFrame | None, qa_id: str, column: str) -> str | None:
    """A text cell, or None when the table, the item or the cell is missing (e.g. a baseline recorded
    before its outputs were stored), so the report can tell "not stored" from an empty answer."""
    if frame is None or column not in frame.columns or qa_id not in frame.index:
        return None
    value = frame.at[qa_id, column]
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _short_evidence(evidence) -> str:
    """The judge's evidence, cut to EVIDENCE_CHARS: per-statement verdicts are summarised with the
    rejected statements first (they explain a low score); anything else stays compact JSON."""
    if evidence is None or (isinstance(evidence, float) and pd.isna(evidence)):
        return ""
    try:
        parsed = json.loads(str(evidence))
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        text = "; ".join(_evidence_part(key, value) for key, value in parsed.items())
    else:
        text = str(evidence)
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def _evidence_part(key: str, value) -> str:
    if isinstance(value, list) and value and all(isinstance(v, dict) and "verdict" in v for v in value):
        rejected = [v for v in value if not v["verdict"]]
        quoted = ", ".join(f'"{_clip(str(v.get("statement", "")), 80)}"' for v in rejected)
        return f"{key}: {len(rejected)} of {len(value)} rejected" + (f": {quoted}" if quoted else "")
    return f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
