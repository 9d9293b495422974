"""The regression report: the candidate against the tenant's baseline, with a verdict, and where and why."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, Output
from pydantic import Field

from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.reporting.baselines import BaselineStore, promotion_reason
from rag_eval_pipeline.reporting.compare import DEFAULT_TOLERANCE, analyse, compare
from rag_eval_pipeline.reporting.render import render_html, render_markdown
from rag_eval_pipeline.resources import WarehouseResource

MARKDOWN_FILE, HTML_FILE = "regression_report.md", "regression_report.html"


class ReportSettings(Config):
    tolerance: float = Field(default=DEFAULT_TOLERANCE, description="Largest allowed drop of a metric's mean.")
    metric_tolerances: dict[str, float] = Field(
        default={}, description="Per-metric overrides of the tolerance, e.g. {'mrr': 0.1}."
    )
    baseline_commit: str = Field(
        default="", description="Compare against this audited commit instead of the tenant's current baseline."
    )
    promote_to_baseline: bool = Field(default=False, description="Make this candidate the tenant's baseline.")
    branch: str = Field(default="", description="The candidate's branch; a pass on main_branch promotes it.")
    main_branch: str = Field(default="main", description="Candidates that pass on this branch become the baseline.")


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
    baselines = BaselineStore(store)
    commit = _single(metric_scores["commit"])
    # Read the baseline before archiving the candidate: a re-audited commit is compared with its last audit.
    baseline_commit, baseline_source = _baseline_commit(baselines, tenant, version, config.baseline_commit)
    baseline, baseline_outputs = (
        baselines.audited(tenant, version, baseline_commit) if baseline_commit else (None, None)
    )
    baselines.archive(tenant, version, commit, metric_scores, candidate_outputs)
    comparison = compare(metric_scores, baseline, {"default": config.tolerance, **config.metric_tolerances})
    analysis = analyse(comparison, metric_scores, baseline, golden_set, candidate_outputs, baseline_outputs)
    reason = promotion_reason(comparison.verdict, baseline is not None, config.promote_to_baseline,
                              config.branch, config.main_branch)
    if reason:
        baselines.promote(tenant, version, commit, reason, config.branch, context.run_id)
        context.log.info(f"candidate {commit} is now the baseline of {tenant}/{version}: {reason}")
    folder = store.partition_dir(tenant, version)
    title = f"Regression report: {tenant} / {version}"
    details = {
        "candidate commit": commit, "baseline commit": baseline_commit or "none", "baseline": baseline_source,
        "promoted to baseline": reason or "no", "judge": _single(metric_scores["judge"]),
        "HTML report": str(folder / HTML_FILE), "Markdown report": str(folder / MARKDOWN_FILE),
    }
    markdown = render_markdown(comparison, title, details, analysis)
    html_path = store.write_text(tenant, version, HTML_FILE, render_html(comparison, title, details, analysis))
    report_path = store.write_text(tenant, version, MARKDOWN_FILE, markdown)
    table = comparison.table.assign(
        verdict_overall=comparison.verdict, commit=commit, baseline_commit=baseline_commit or "none",
        promoted_to_baseline=reason or "",
    )
    return Output(
        table,
        metadata={
            "verdict": comparison.verdict,
            "failing_metrics": ", ".join(comparison.failing_metrics) or "none",
            "baseline": f"{baseline_commit or 'none'} ({baseline_source})",
            "promoted_to_baseline": reason or "no",
            "stage_summary": analysis.stage_summary,
            "report": MetadataValue.md(markdown),
            "report_path": str(report_path),
            "report_html_path": str(html_path),
        },
    )


def _baseline_commit(baselines: BaselineStore, tenant: str, version: str, requested: str) -> tuple[str, str]:
    """The commit to compare against and where it came from; ("", why) when there is none yet."""
    if requested:
        return requested, "asked for by the run"
    current = baselines.current(tenant, version)
    if current is None:
        return "", "none yet"
    return current.commit, f"current baseline since {current.promoted_at}: {current.reason}"


def _single(values: pd.Series) -> str:
    distinct = sorted(set(values.dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
