"""A score table's headline numbers per metric, as flat numeric entries the Dagster UI plots over materializations.

`score_trends` gives, per metric, `mean/<metric>` (over the measured rows), `measured/<metric>` (how many)
and `coverage/<metric>` (measured rows over the rows the metric applies to, as the report counts coverage:
an item the metric does not apply to is left out; reporting/compare.py `coverage_of`). A number the table
cannot give (a metric measured on no item, or applying to none) is left out rather than written as NaN,
so a plot shows a gap, not a zero. Dagster-free; the metric_scores asset puts them in its metadata.
"""

from __future__ import annotations

import pandas as pd

from rag_eval_pipeline.core.judging.results import NOT_APPLICABLE, OK, unmeasured_cause

MEAN, MEASURED, COVERAGE = "mean/", "measured/", "coverage/"


def score_trends(scores: pd.DataFrame) -> dict[str, float | int]:
    """{"mean/<metric>": float, "measured/<metric>": int, "coverage/<metric>": float} of a score table."""
    trends: dict[str, float | int] = {}
    for metric, rows in scores.groupby("metric", sort=True):
        measured = rows[(rows["status"] == OK) & rows["score"].notna()]
        unmeasured = rows.drop(measured.index)
        not_applicable = int(
            (unmeasured["reason"].fillna("").astype(str).map(unmeasured_cause) == NOT_APPLICABLE).sum()
        )
        applicable = len(rows) - not_applicable
        if len(measured):
            trends[f"{MEAN}{metric}"] = round(float(measured["score"].mean()), 4)
        trends[f"{MEASURED}{metric}"] = int(len(measured))
        if applicable:
            trends[f"{COVERAGE}{metric}"] = round(len(measured) / applicable, 4)
    return trends
