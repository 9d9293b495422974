"""The regression gate as a blocking asset check on the report: a blocked candidate fails the run."""

# No `from __future__ import annotations`: Dagster reads the check's live annotations.

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity

from rag_eval_pipeline.partitions import partitioned_asset_check
from rag_eval_pipeline.reporting.compare import BLOCK, NOTHING_SCORED


@partitioned_asset_check(
    asset="regression_report",
    blocking=True,
    description="Fails when the report blocks the candidate: a metric's mean or coverage dropped by more "
    "than its tolerance against the baseline, or nothing could be scored.",
)
def regression_gate(regression_report: pd.DataFrame) -> AssetCheckResult:
    verdict = str(regression_report["verdict_overall"].iloc[0]) if len(regression_report) else NOTHING_SCORED
    failing = regression_report.loc[regression_report["verdict"] == "regressed", "metric"].tolist()
    return AssetCheckResult(
        passed=verdict not in (BLOCK, NOTHING_SCORED),
        severity=AssetCheckSeverity.ERROR,
        metadata={"verdict": verdict, "failing_metrics": ", ".join(failing) or "none"},
    )


REPORTING_CHECKS = [regression_gate]
