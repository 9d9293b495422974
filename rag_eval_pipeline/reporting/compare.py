"""Compare a candidate's scores with the tenant's baseline and decide whether to block.

Means are paired: a metric is compared over the golden items measured in both runs, so a change in
which items could be measured does not pass for a change in quality. Coverage (the share of items
measured) is compared too: a candidate that fails on more items is a regression even if the items
it did answer score well. Aggregates never contain NaN; unmeasured items are counted instead.

Beside the verdict, the report explains where and why (`analyse`): a bootstrap interval of each
delta, the deltas per question type, retrieval/generation quadrants, and the worst regressed items.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.defaults import DEFAULT_TOLERANCE

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240605  # fixed: the same scores always give the same interval
WORST_ITEMS = 5
EVIDENCE_CHARS = 300

PASS = "pass"
BLOCK = "block"
NO_BASELINE = "pass (no baseline yet: this candidate is recorded as the baseline)"
NOTHING_SCORED = "block (no item was scored: the golden set or the candidate's outputs are empty)"

Tolerance = float | dict[str, float]


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # one row per metric
    verdict: str
    failing_metrics: list[str]
    tolerance: float  # the default; per-metric values are in table["tolerance"]


def compare(candidate: pd.DataFrame, baseline: pd.DataFrame | None, tolerance: Tolerance = DEFAULT_TOLERANCE) -> Comparison:
    """tolerance: one value for every metric, or {metric: value} overrides (key "default" sets the rest)."""
    default, overrides = _split_tolerance(tolerance)
    rows = [
        _metric_row(metric, group, baseline, overrides.get(metric, default))
        for metric, group in candidate.groupby("metric", sort=False)
    ]
    # Nullable floats: a metric nobody could measure has <NA> and a note, never NaN.
    table = pd.DataFrame(rows, columns=_COLUMNS).astype({column: "Float64" for column in _NULLABLE_COLUMNS})
    failing = table.loc[table["verdict"] == "regressed", "metric"].tolist()
    if table.empty:
        verdict = NOTHING_SCORED
    elif baseline is None:
        verdict = NO_BASELINE
    else:
        verdict = BLOCK if failing else PASS
    return Comparison(table, verdict, failing, default)


class IncomparableScores(ValueError):
    """The baseline was scored differently (judge, k or metric set): its means say nothing about this candidate."""


def scoring_identity(scores: pd.DataFrame) -> dict[str, object]:
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
        for name in ("judge", "k", "metrics") if ours[name] != theirs[name]
    ]
    return "; ".join(differences) or None


def _shown(value) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def _split_tolerance(tolerance: Tolerance) -> tuple[float, dict[str, float]]:
    if isinstance(tolerance, dict):
        overrides = {metric: float(value) for metric, value in tolerance.items() if metric != "default"}
        return float(tolerance.get("default", DEFAULT_TOLERANCE)), overrides
    return float(tolerance), {}


_NULLABLE_COLUMNS = ("candidate_mean", "baseline_mean", "delta", "delta_ci_low", "delta_ci_high", "baseline_coverage")
_COLUMNS = ["metric", "candidate_mean", "n_items", "n_measured", "n_unmeasured", "coverage", "baseline_mean",
            "paired_items", "delta", "delta_ci_low", "delta_ci_high", "baseline_coverage", "tolerance", "verdict", "note"]


def _metric_row(metric: str, scores: pd.DataFrame, baseline: pd.DataFrame | None, tolerance: float) -> dict:
    measured = _measured(scores)
    row = {
        "metric": metric,
        "candidate_mean": _mean(measured["score"]),
        "n_items": int(len(scores)),
        "n_measured": int(len(measured)),
        "n_unmeasured": int(len(scores) - len(measured)),
        "coverage": round(len(measured) / len(scores), 4) if len(scores) else 0.0,
        "baseline_mean": None,
        "paired_items": 0,
        "delta": None,
        "delta_ci_low": None,
        "delta_ci_high": None,
        "baseline_coverage": None,
        "tolerance": tolerance,
        "verdict": "no baseline",
        "note": _unmeasured_note(scores),
    }
    if baseline is None:
        return row
    base = baseline[baseline["metric"] == metric]
    paired = _pairs(measured, base)
    row["baseline_coverage"] = round(len(_measured(base)) / len(base), 4) if len(base) else 0.0
    row["paired_items"] = int(len(paired))
    if paired.empty:
        row["verdict"] = "unmeasured" if row["baseline_coverage"] == 0 else "regressed"
        return row
    row["candidate_mean"] = _mean(paired["score"])
    row["baseline_mean"] = _mean(paired["score_baseline"])
    row["delta"] = round(row["candidate_mean"] - row["baseline_mean"], 4)
    row["delta_ci_low"], row["delta_ci_high"] = bootstrap_interval(paired["score"] - paired["score_baseline"])
    coverage_drop = round(row["baseline_coverage"] - row["coverage"], 4)  # 1.0 - 0.95 is not > 0.05
    row["verdict"] = "regressed" if row["delta"] < -tolerance or coverage_drop > tolerance else "ok"
    return row


def bootstrap_interval(differences: pd.Series, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float | None, float | None]:
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
    return scores[(scores["status"] == "ok") & scores["score"].notna()]


def _pairs(candidate: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Items measured in both runs, with the baseline's columns suffixed '_baseline'."""
    return _measured(candidate).merge(_measured(baseline), on=["qa_id", "metric"], suffixes=("", "_baseline"))


def _unmeasured_note(scores: pd.DataFrame) -> str:
    """Why items went unmeasured: the most frequent reason and how often it occurred."""
    reasons = scores.loc[scores["status"] != "ok", "reason"].value_counts()
    if reasons.empty:
        return ""
    reason, count = reasons.index[0], int(reasons.iloc[0])
    return f"{reason} ({count} item{'s' if count > 1 else ''})"


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


def analyse(comparison: Comparison, candidate: pd.DataFrame, baseline: pd.DataFrame | None,
            golden: pd.DataFrame | None = None, outputs: pd.DataFrame | None = None,
            baseline_outputs: pd.DataFrame | None = None) -> Analysis:
    basis = comparison.failing_metrics or ["answer_correctness"]
    return Analysis(
        breakdown=breakdown_by_type(candidate, baseline, golden),
        quadrants=quadrant_counts(candidate, baseline),
        stage_summary=stage_summary(candidate, baseline),
        worst=worst_items(candidate, baseline, basis, golden, outputs, baseline_outputs),
        worst_basis=basis,
    )


BREAKDOWN_COLUMNS = ["question_type", "metric", "candidate_mean", "baseline_mean", "delta", "n"]


def breakdown_by_type(candidate: pd.DataFrame, baseline: pd.DataFrame | None, golden: pd.DataFrame | None) -> pd.DataFrame:
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
        delta = round(candidate_mean - baseline_mean, 4) if baseline_mean is not None else None
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
        f"{stage}: {counts['worse']} item(s) good -> bad, {counts['better']} bad -> good" for stage, counts in moves.items()
    )
    if max(net.values()) <= 0:
        return f"Neither stage regressed ({detail})."
    if net["retrieval"] == net["generation"]:
        return f"Retrieval and generation regressed alike ({detail})."
    worst = max(net, key=net.get)
    return f"{worst.capitalize()} regressed most ({detail})."


WORST_COLUMNS = ["qa_id", "metric", "question_type", "question", "baseline_score", "candidate_score", "drop",
                 "baseline_answer", "candidate_answer", "evidence"]


def worst_items(candidate: pd.DataFrame, baseline: pd.DataFrame | None, metrics: list[str],
                golden: pd.DataFrame | None = None, outputs: pd.DataFrame | None = None,
                baseline_outputs: pd.DataFrame | None = None, limit: int = WORST_ITEMS) -> pd.DataFrame:
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
            "qa_id": pair["qa_id"], "metric": pair["metric"],
            "question_type": _lookup(gold, pair["qa_id"], "question_type"),
            "question": _lookup(gold, pair["qa_id"], "question") or _lookup(_indexed(outputs), pair["qa_id"], "question"),
            "baseline_score": pair["score_baseline"], "candidate_score": pair["score"], "drop": pair["drop"],
            "baseline_answer": _lookup(_indexed(baseline_outputs), pair["qa_id"], "answer"),
            "candidate_answer": _lookup(_indexed(outputs), pair["qa_id"], "answer"),
            "evidence": _short_evidence(pair.get("evidence")),
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
