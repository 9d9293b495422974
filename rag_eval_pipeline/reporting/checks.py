"""The regression gate as a blocking asset check on the report: a blocked candidate fails the run."""

# No `from __future__ import annotations`: Dagster reads the check's live annotations.

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity

from rag_eval_pipeline.partitions import partitioned_asset_check
from rag_eval_pipeline.reporting.compare import NOTHING_SCORED, PASSES, decision


@partitioned_asset_check(
    asset="regression_report",
    blocking=True,
    description="Passes only when the report passes the candidate. Fails when it blocks it (a metric's mean "
    "dropped by more than its tolerance against the baseline, or the candidate gave nothing to measure on more "
    "items) and when it cannot decide (a metric measured on too few items on either side, no baseline on this "
    "branch, nothing scored).",
)
def regression_gate(regression_report: pd.DataFrame) -> AssetCheckResult:
    verdict = str(regression_report["verdict_overall"].iloc[0]) if len(regression_report) else NOTHING_SCORED
    failing = regression_report.loc[regression_report["verdict"] == "regressed", "metric"].tolist()
    unmeasured = regression_report.loc[regression_report["verdict"] == "unmeasured", "metric"].tolist()
    undecided = regression_report.loc[regression_report["verdict"] == "undecided", "metric"].tolist()
    return AssetCheckResult(
        passed=decision(verdict) == PASSES,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "verdict": verdict,
            "failing_metrics": ", ".join(failing) or "none",
            "unmeasured_metrics": ", ".join(unmeasured) or "none",
            "undecided_metrics": ", ".join(undecided) or "none",
        },
    )


REPORTING_CHECKS = [regression_gate]
