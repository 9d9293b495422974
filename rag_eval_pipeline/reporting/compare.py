"""Compare a candidate's scores with the tenant's baseline and decide whether to block.

Means are paired: a metric is compared over the golden items measured in both runs, so a change in
which items could be measured does not pass for a change in quality. Coverage (the share of items
measured) is compared too: a candidate that fails on more items is a regression even if the items
it did answer score well. Aggregates never contain NaN; unmeasured items are counted instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

DEFAULT_TOLERANCE = 0.05

PASS = "pass"
BLOCK = "block"
NO_BASELINE = "pass (no baseline yet: this candidate is recorded as the baseline)"
NOTHING_SCORED = "block (no item was scored: the golden set or the candidate's outputs are empty)"


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # one row per metric
    verdict: str
    failing_metrics: list[str]
    tolerance: float


def compare(candidate: pd.DataFrame, baseline: pd.DataFrame | None, tolerance: float = DEFAULT_TOLERANCE) -> Comparison:
    rows = [_metric_row(metric, group, baseline, tolerance) for metric, group in candidate.groupby("metric", sort=False)]
    # Nullable floats: a metric nobody could measure has <NA> and a note, never NaN.
    table = pd.DataFrame(rows, columns=_COLUMNS).astype({column: "Float64" for column in _MEAN_COLUMNS})
    failing = table.loc[table["verdict"] == "regressed", "metric"].tolist()
    if table.empty:
        verdict = NOTHING_SCORED
    elif baseline is None:
        verdict = NO_BASELINE
    else:
        verdict = BLOCK if failing else PASS
    return Comparison(table, verdict, failing, tolerance)


_MEAN_COLUMNS = ("candidate_mean", "baseline_mean", "delta", "baseline_coverage")
_COLUMNS = ["metric", "candidate_mean", "n_items", "n_measured", "n_unmeasured", "coverage", "baseline_mean",
            "paired_items", "delta", "baseline_coverage", "verdict", "note"]


def _metric_row(metric: str, scores: pd.DataFrame, baseline: pd.DataFrame | None, tolerance: float) -> dict:
    measured = scores[scores["status"] == "ok"]
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
        "baseline_coverage": None,
        "verdict": "no baseline",
        "note": _unmeasured_note(scores),
    }
    if baseline is None:
        return row
    base = baseline[baseline["metric"] == metric]
    base_measured = base[base["status"] == "ok"]
    paired = measured.merge(base_measured, on="qa_id", suffixes=("", "_baseline"))
    row["baseline_coverage"] = round(len(base_measured) / len(base), 4) if len(base) else 0.0
    row["paired_items"] = int(len(paired))
    if paired.empty:
        row["verdict"] = "unmeasured" if row["baseline_coverage"] == 0 else "regressed"
        return row
    row["candidate_mean"] = _mean(paired["score"])
    row["baseline_mean"] = _mean(paired["score_baseline"])
    row["delta"] = round(row["candidate_mean"] - row["baseline_mean"], 4)
    coverage_drop = round(row["baseline_coverage"] - row["coverage"], 4)  # 1.0 - 0.95 is not > 0.05
    row["verdict"] = "regressed" if row["delta"] < -tolerance or coverage_drop > tolerance else "ok"
    return row


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


def render_markdown(comparison: Comparison, title: str, details: dict[str, str]) -> str:
    lines = [f"# {title}", "", f"**Verdict: {comparison.verdict.upper()}**", ""]
    lines += [f"- {key}: {value}" for key, value in details.items()]
    lines += [f"- tolerance: a metric blocks when its mean, or its coverage, drops by more than {comparison.tolerance:g}", ""]
    header = "| metric | candidate | baseline | delta | measured | coverage | verdict |"
    lines += [header, "|---|---|---|---|---|---|---|"]
    for row in comparison.table.to_dict("records"):
        lines.append(
            f"| {row['metric']} | {_fmt(row['candidate_mean'])} | {_fmt(row['baseline_mean'])} | "
            f"{_fmt(row['delta'], signed=True)} | {row['n_measured']}/{row['n_items']} | {row['coverage']:.0%} | {row['verdict']} |"
        )
    if comparison.failing_metrics:
        lines += ["", f"Regressed: {', '.join(comparison.failing_metrics)}."]
    notes = [f"- {row['metric']}: {row['note']}" for row in comparison.table.to_dict("records") if row["note"]]
    if notes:
        lines += ["", "Unmeasured items (excluded from the means, counted in coverage):", *notes]
    return "\n".join(lines) + "\n"


def _fmt(value, signed: bool = False) -> str:
    if value is None or pd.isna(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
