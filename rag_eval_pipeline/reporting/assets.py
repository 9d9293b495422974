"""The regression report: the candidate against the tenant's baseline, with a verdict."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, Output
from pydantic import Field

from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.reporting.compare import DEFAULT_TOLERANCE, compare, render_markdown
from rag_eval_pipeline.resources import WarehouseResource

BASELINE_TABLE = "baseline_scores"


class ReportSettings(Config):
    tolerance: float = Field(default=DEFAULT_TOLERANCE, description="Largest allowed drop of a metric's mean.")
    promote_to_baseline: bool = Field(default=False, description="Make this candidate the tenant's baseline.")


@lineage_asset(
    "reporting",
    "Per metric: candidate and baseline means over the same items, the delta, coverage, and the "
    "verdict (block when a metric drops by more than the tolerance). The rendered Markdown is in the metadata.",
)
def regression_report(
    context: AssetExecutionContext,
    config: ReportSettings,
    warehouse: WarehouseResource,
    metric_scores: pd.DataFrame,
) -> Output[pd.DataFrame]:
    tenant, version = split_key(context.partition_key)
    store = warehouse.store()
    baseline = store.read(tenant, version, BASELINE_TABLE) if store.exists(tenant, version, BASELINE_TABLE) else None
    comparison = compare(metric_scores, baseline, config.tolerance)
    commit = _single(metric_scores["commit"])
    baseline_commit = _single(baseline["commit"]) if baseline is not None else "none"
    markdown = render_markdown(
        comparison,
        f"Regression report: {tenant} / {version}",
        {"candidate commit": commit, "baseline commit": baseline_commit, "judge": _single(metric_scores["judge"])},
    )
    report_path = store.write_text(tenant, version, "regression_report.md", markdown)
    if baseline is None or config.promote_to_baseline:
        store.write(tenant, version, BASELINE_TABLE, metric_scores)
        context.log.info(f"candidate {commit} recorded as the baseline of {tenant}/{version}")
    table = comparison.table.assign(verdict_overall=comparison.verdict, commit=commit, baseline_commit=baseline_commit)
    return Output(
        table,
        metadata={
            "verdict": comparison.verdict,
            "failing_metrics": ", ".join(comparison.failing_metrics) or "none",
            "report": MetadataValue.md(markdown),
            "report_path": str(report_path),
        },
    )


def _single(values: pd.Series) -> str:
    distinct = sorted(set(values.dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
