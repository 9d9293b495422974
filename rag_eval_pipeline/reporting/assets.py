"""The regression report: the candidate against the tenant's baseline, with a verdict, and where and why."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, Output
from pydantic import Field

from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.reporting.compare import DEFAULT_TOLERANCE, analyse, compare
from rag_eval_pipeline.reporting.render import render_html, render_markdown
from rag_eval_pipeline.resources import WarehouseResource

BASELINE_TABLE = "baseline_scores"
BASELINE_OUTPUTS_TABLE = "baseline_outputs"  # the baseline's answers, for the worst items' side by side
MARKDOWN_FILE, HTML_FILE = "regression_report.md", "regression_report.html"


class ReportSettings(Config):
    tolerance: float = Field(default=DEFAULT_TOLERANCE, description="Largest allowed drop of a metric's mean.")
    metric_tolerances: dict[str, float] = Field(
        default={}, description="Per-metric overrides of the tolerance, e.g. {'mrr': 0.1}."
    )
    promote_to_baseline: bool = Field(default=False, description="Make this candidate the tenant's baseline.")


@lineage_asset(
    "reporting",
    "Per metric: candidate and baseline means over the same items, the delta with its bootstrap 95% "
    "interval, coverage, tolerance and the verdict (block when a metric drops by more than its tolerance). "
    "The Markdown and HTML reports add deltas per question type, retrieval/generation quadrants and the "
    "worst regressed items.",
)
def regression_report(
    context: AssetExecutionContext,
    config: ReportSettings,
    warehouse: WarehouseResource,
    metric_scores: pd.DataFrame,
    golden_set: pd.DataFrame,
    candidate_outputs: pd.DataFrame,
) -> Output[pd.DataFrame]:
    tenant, version = split_key(context.partition_key)
    store = warehouse.store()
    baseline = _read_if_exists(store, tenant, version, BASELINE_TABLE)
    baseline_outputs = _read_if_exists(store, tenant, version, BASELINE_OUTPUTS_TABLE) if baseline is not None else None
    comparison = compare(metric_scores, baseline, {"default": config.tolerance, **config.metric_tolerances})
    analysis = analyse(comparison, metric_scores, baseline, golden_set, candidate_outputs, baseline_outputs)
    commit = _single(metric_scores["commit"])
    baseline_commit = _single(baseline["commit"]) if baseline is not None else "none"
    folder = store.partition_dir(tenant, version)
    title = f"Regression report: {tenant} / {version}"
    details = {
        "candidate commit": commit, "baseline commit": baseline_commit, "judge": _single(metric_scores["judge"]),
        "HTML report": str(folder / HTML_FILE), "Markdown report": str(folder / MARKDOWN_FILE),
    }
    markdown = render_markdown(comparison, title, details, analysis)
    html_path = store.write_text(tenant, version, HTML_FILE, render_html(comparison, title, details, analysis))
    report_path = store.write_text(tenant, version, MARKDOWN_FILE, markdown)
    if baseline is None or config.promote_to_baseline:
        store.write(tenant, version, BASELINE_TABLE, metric_scores)
        store.write(tenant, version, BASELINE_OUTPUTS_TABLE, candidate_outputs)
        context.log.info(f"candidate {commit} recorded as the baseline of {tenant}/{version}")
    table = comparison.table.assign(verdict_overall=comparison.verdict, commit=commit, baseline_commit=baseline_commit)
    return Output(
        table,
        metadata={
            "verdict": comparison.verdict,
            "failing_metrics": ", ".join(comparison.failing_metrics) or "none",
            "stage_summary": analysis.stage_summary,
            "report": MetadataValue.md(markdown),
            "report_path": str(report_path),
            "report_html_path": str(html_path),
        },
    )


def _read_if_exists(store, tenant: str, version: str, name: str) -> pd.DataFrame | None:
    return store.read(tenant, version, name) if store.exists(tenant, version, name) else None


def _single(values: pd.Series) -> str:
    distinct = sorted(set(values.dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
