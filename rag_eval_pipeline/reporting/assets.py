"""The regression report: the candidate against the tenant's baseline, with a verdict, and where and why."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, Output
from pydantic import Field

from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.reporting.baselines import BaselineStore, promotion_reason
from rag_eval_pipeline.evaluation.scoring import score_outputs
from rag_eval_pipeline.reporting.compare import (
    DEFAULT_TOLERANCE,
    IncomparableScores,
    analyse,
    compare,
    incomparable_reason,
    scoring_identity,
)
from rag_eval_pipeline.reporting.render import render_html, render_markdown
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource, WarehouseResource
from rag_eval_pipeline.warehouse import COMMIT_TAG, audited_commit, write_text_atomically

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
    rescore_baseline: bool = Field(
        default=True,
        description="When the baseline was scored by another judge, k or metric set, re-score its archived "
        "outputs with this run's judge; when false, such a run fails rather than compare unlike scores.",
    )


@lineage_asset(
    "reporting",
    "Per metric: candidate and baseline means over the same items, the delta with its bootstrap 95% "
    "interval, coverage, tolerance and the verdict (block when a metric drops by more than its tolerance). "
    "The Markdown and HTML reports add deltas per question type, retrieval/generation quadrants and the "
    "worst regressed items. Kept per audited commit and run.",
)
def regression_report(
    context: AssetExecutionContext,
    config: ReportSettings,
    warehouse: WarehouseResource,
    judge: JudgeResource,
    embedder: EmbedderResource,
    metric_scores: pd.DataFrame,
    golden_set: pd.DataFrame,
    candidate_outputs: pd.DataFrame,
) -> Output[pd.DataFrame]:
    tenant, version = split_key(context.partition_key)
    run_id = context.run.run_id
    commit = audited_commit(context.run.tags.get(COMMIT_TAG), metric_scores, candidate_outputs)
    store = warehouse.store()
    baselines = BaselineStore(store)
    # One tenant's gates take turns from reading the baseline to promoting: no promotion is lost or doubled.
    with baselines.locked(tenant):
        current = baselines.current(tenant, version)
        # Read the baseline before archiving the candidate: a re-audited commit is compared with its last audit.
        baseline_commit, baseline_source = _baseline_commit(current, config.baseline_commit)
        baseline, baseline_outputs = (
            baselines.audited(tenant, version, baseline_commit) if baseline_commit else (None, None)
        )
        baselines.archive(tenant, version, commit, metric_scores, candidate_outputs, run_id)
        mismatch = incomparable_reason(metric_scores, baseline) if baseline is not None else None
        if mismatch:
            if not config.rescore_baseline:
                raise IncomparableScores(
                    f"cannot compare {commit} with baseline {baseline_commit} on {tenant}/{version}: they were "
                    f"scored differently ({mismatch}); allow re-scoring the baseline, or choose a baseline scored "
                    "like this candidate"
                )
            context.log.warning(f"baseline {baseline_commit} was scored differently ({mismatch}): re-scoring its outputs")
            baseline = rescore(baseline_outputs, golden_set, metric_scores, judge, embedder)
            baseline_source += f"; re-scored with this run's judge (it was scored differently: {mismatch})"
        comparison = compare(metric_scores, baseline, {"default": config.tolerance, **config.metric_tolerances})
        analysis = analyse(comparison, metric_scores, baseline, golden_set, candidate_outputs, baseline_outputs)
        reason = promotion_reason(comparison.verdict, baseline is not None, config.promote_to_baseline,
                                  config.branch, config.main_branch)
        if reason:
            baselines.promote(tenant, version, commit, reason, config.branch, run_id,
                              expected_current=current.commit if current else None)
            context.log.info(f"candidate {commit} is now the baseline of {tenant}/{version}: {reason}")
    folder = store.audit_dir(tenant, version, commit, run_id)
    title = f"Regression report: {tenant} / {version} / commit {commit}"
    details = {
        "candidate commit": commit, "run": run_id, "baseline commit": baseline_commit or "none",
        "baseline": baseline_source, "promoted to baseline": reason or "no", "judge": _single(metric_scores["judge"]),
        "HTML report": str(folder / HTML_FILE), "Markdown report": str(folder / MARKDOWN_FILE),
    }
    markdown = render_markdown(comparison, title, details, analysis)
    html_path = write_text_atomically(folder / HTML_FILE, render_html(comparison, title, details, analysis))
    report_path = write_text_atomically(folder / MARKDOWN_FILE, markdown)
    table = comparison.table.assign(
        verdict_overall=comparison.verdict, commit=commit, baseline_commit=baseline_commit or "none",
        baseline_source=baseline_source, promoted_to_baseline=reason or "",
    )
    return Output(
        table,
        metadata={
            "commit": commit,
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


def rescore(outputs: pd.DataFrame, golden: pd.DataFrame, like: pd.DataFrame, judge: JudgeResource,
            embedder: EmbedderResource) -> pd.DataFrame:
    """The archived outputs scored the way `like` was: this run's judge, k and metrics."""
    identity = scoring_identity(like)
    scores, _ = score_outputs(outputs, golden, judge.get(), embedder.get(), identity["metrics"], int(identity["k"]))
    if incomparable_reason(like, scores):
        raise IncomparableScores(f"re-scoring the baseline did not reproduce this run's scoring: {incomparable_reason(like, scores)}")
    return scores


def _baseline_commit(current, requested: str) -> tuple[str, str]:
    """The commit to compare against and where it came from; ("", why) when there is none yet."""
    if requested:
        return requested, "asked for by the run"
    if current is None:
        return "", "none yet"
    return current.commit, f"current baseline since {current.promoted_at}: {current.reason}"


def _single(values: pd.Series) -> str:
    distinct = sorted(set(values.dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
