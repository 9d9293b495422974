"""The regression report: the candidate against the tenant's baseline, with a verdict, and where and why."""

import os
from dataclasses import dataclass, replace
from typing import Annotated, Literal

import pandas as pd
from dagster import AssetExecutionContext, AssetKey, Config, DagsterEventType, MetadataValue, Output
from pydantic import Field

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE
from rag_eval_pipeline.core.judging.judgement import total_usage
from rag_eval_pipeline.core.metrics.registry import tolerances as declared_tolerances
from rag_eval_pipeline.core.names import COMMIT_TAG
from rag_eval_pipeline.evaluation.scoring import score_outputs
from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics
from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline.reporting.baselines import PromotionPolicy, promotion_reason
from rag_eval_pipeline.reporting.compare import (
    DEFAULT_TOLERANCE,
    IncomparableScores,
    analyse,
    compare,
    incomparable_reason,
    scoring_identity,
)
from rag_eval_pipeline.reporting.report import Audit, Outcome, build_report, judges_of
from rag_eval_pipeline.reporting.trust import PPI, judge_trust, require_labels
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource, RunLivenessResource, WarehouseResource
from rag_eval_pipeline.stores.layout import STORED_BY_ASSET, audited_commit
from rag_eval_pipeline.stores.protocols import BaselineChanged, BaselineStore, Promotion


class ReportConfig(Config):
    tolerance: float = Field(
        default=DEFAULT_TOLERANCE,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Largest allowed drop of a metric's mean, 0 to 1.",
    )
    metric_tolerances: dict[str, Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] = Field(
        default={}, description="Per-metric overrides of the tolerance, e.g. {'mrr': 0.1}."
    )
    min_coverage: float = Field(
        default=DEFAULT_MIN_COVERAGE,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Least share of a metric's applicable items that must be measured, on the candidate's side "
        "and the baseline's, for the gate to decide on it and for the candidate to become a baseline.",
    )
    baseline_commit: str = Field(
        default="",
        description="Compare against this audited commit instead of the tenant's current baseline "
        "(for comparison only: such a run never moves the baseline by itself).",
    )
    promote_to_baseline: bool = Field(default=False, description="Make this candidate the tenant's baseline.")
    branch: str = Field(default="", description="The candidate's branch; a pass on main_branch promotes it.")
    main_branch: str = Field(
        default="main",
        description="Candidates that pass on this branch become the baseline; "
        "the first audit of a version on it proposes the first baseline.",
    )
    first_audit_is_baseline: bool = Field(
        default=False,
        description="The first audit of a version becomes its baseline whatever the branch "
        "(`rag-eval run` and `demo`: the operator's own runs).",
    )
    decide_on: Literal["judge", "ppi"] = Field(
        default="judge",
        description="Decide judged metrics on the judge's own deltas, or on their prediction-powered intervals "
        "(corrected by the tenant's labels scored by this judge; refused without them).",
    )
    rescore_baseline: bool = Field(
        default=True,
        description="When the baseline was scored by another judge, k or metric set, re-score its archived "
        "outputs with this run's judge; when false, such a run fails rather than compare unlike scores.",
    )

    def tolerances(self, declared: dict[str, float] | None = None) -> dict[str, float]:
        """The largest allowed drop per metric, "default" for the others: what the comparison applies.
        declared: the tolerances the scored metrics declare, which this config's per-metric ones override."""
        return {"default": self.tolerance, **(declared or {}), **self.metric_tolerances}

    def promotion_policy(self) -> PromotionPolicy:
        return PromotionPolicy(
            explicit=self.promote_to_baseline,
            branch=self.branch,
            main_branch=self.main_branch,
            baseline_requested=bool(self.baseline_commit),
            first_audit_is_baseline=self.first_audit_is_baseline,
        )


@lineage_asset(
    "reporting",
    "Per metric: candidate and baseline means over the same items, the delta with its bootstrap 95% "
    "interval, coverage, tolerance and the verdict (block when a metric drops by more than its tolerance; "
    "unmeasured when a metric was measured on too few items to decide). "
    "The Markdown and HTML reports add deltas per question type, retrieval/generation quadrants and the "
    "worst regressed items. Kept per audited commit and run.",
)
def regression_report(
    context: AssetExecutionContext,
    config: ReportConfig,
    warehouse: WarehouseResource,
    judge: JudgeResource,
    embedder: EmbedderResource,
    run_liveness: RunLivenessResource,
    metric_scores: pd.DataFrame,
    golden_set: pd.DataFrame,
    candidate_outputs: pd.DataFrame,
) -> Output[pd.DataFrame]:
    tenant, version = split_key(context.partition_key)
    run_id = context.run.run_id
    commit = audited_commit(context.run.tags.get(COMMIT_TAG), metric_scores, candidate_outputs)
    store = warehouse.store()
    baselines = warehouse.baselines()
    scored = ScoredRun(commit, metric_scores, candidate_outputs, golden_set)
    trust = judge_trust(store, tenant, metric_scores)
    tolerances = config.tolerances(declared_tolerances(resolve_metrics(scoring_identity(metric_scores)["metrics"])))
    if config.decide_on == PPI:  # refused before anything is compared or stored
        require_labels(trust, sorted(set(metric_scores["metric"].astype(str))), tenant)
    audit = Audit(
        tenant,
        version,
        commit,
        run_id,
        store.report_location(tenant, version, commit, run_id),
        judges_of(metric_scores),
        settings.load().phoenix_url,
    )
    scoring_tokens = _scoring_tokens(context, metric_scores)
    prices = settings.price_table(os.environ.get(settings.JUDGE_VARIABLES["price_table"], ""))
    for _ in range(COMPARE_ATTEMPTS):
        # Compared outside the lock (re-scoring a baseline may take long); then, under it and only if the
        # baseline is still the one compared with, the report is stored, the audit archived and, last of
        # all, the candidate promoted: no promotion is lost or doubled, and none outlives a report that
        # failed to be written.
        current = baselines.current(tenant, version)
        outcome, rescoring = _judge_against_baseline(
            context, config, tolerances, baselines, tenant, version, current, scored, judge, embedder, trust
        )
        if scoring_tokens is not None:  # the run's tokens: its scoring's, per metric, and the re-scoring's
            outcome = replace(outcome, tokens=replace(scoring_tokens, rescoring=rescoring))
        report = build_report(audit, outcome, prices)
        with baselines.locked(tenant):
            if baselines.current(tenant, version) != current:
                context.log.info(
                    f"the baseline of {tenant}/{version} changed while {commit} was compared: comparing again"
                )
                continue
            store.write_report(tenant, version, commit, run_id, report.stored(), {"tolerances": tolerances})
            store.write_audit_table(tenant, version, commit, run_id, "regression_report", report.table)
            baselines.mark_complete(tenant, version, commit, run_id)  # its tables are in the run's folder already
            if outcome.promotion:
                baselines.promote(
                    tenant,
                    version,
                    commit,
                    outcome.promotion,
                    config.branch,
                    run_id,
                    expected_current=current.commit if current else None,
                )
                context.log.info(f"candidate {commit} is now the baseline of {tenant}/{version}: {outcome.promotion}")
            break
    else:
        raise BaselineChanged(
            f"the baseline of {tenant}/{version} kept changing while {commit} was compared; re-run the gate"
        )
    return Output(
        report.table,
        metadata={
            **report.summary,
            **report.trends,  # mean/, delta/, coverage/<metric>, judge_tokens: numbers the UI plots across runs
            "report": MetadataValue.md(report.markdown),
            STORED_BY_ASSET: True,
        },
    )


def _scoring_tokens(context: AssetExecutionContext, scores: pd.DataFrame) -> cost.RunTokens | None:
    """The judge's calls and tokens per metric, from the `judge_usage` metric_scores recorded in this run
    (the audit tables are materialized in one run); None when this run did not score them."""
    metrics = sorted({str(metric) for metric in scores["metric"]})
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
    ).records
    for record in reversed(records):
        materialization = record.event_log_entry.asset_materialization
        if (
            materialization is None
            or materialization.asset_key != AssetKey("metric_scores")
            or materialization.partition != context.partition_key
        ):
            continue
        value = materialization.metadata.get("judge_usage")
        usage = getattr(value, "value", None) or {}
        return cost.split_usage(usage, cost.serves_of(usage), metrics) if isinstance(usage, dict) else None
    return None


COMPARE_ATTEMPTS = 5


@dataclass(frozen=True)
class ScoredRun:
    commit: str
    scores: pd.DataFrame
    outputs: pd.DataFrame
    golden: pd.DataFrame


def _judge_against_baseline(
    context,
    config: ReportConfig,
    tolerances: dict[str, float],
    baselines: BaselineStore,
    tenant: str,
    version: str,
    current: Promotion | None,
    run: ScoredRun,
    judge,
    embedder,
    trust,
) -> tuple[Outcome, cost.TokenCount]:
    """The candidate against the baseline (re-scored when it was scored differently), and whether it is promoted;
    and the judge calls and tokens the re-scoring took (none when the baseline was not re-scored)."""
    baseline_commit, baseline_source = _baseline_commit(current, config.baseline_commit)
    baseline, baseline_outputs, rescoring = None, None, cost.TokenCount()
    if baseline_commit:
        # The promoted audit itself, not a later re-audit of the same commit.
        promoted_run = current.run_id if current and current.commit == baseline_commit else ""
        baseline, baseline_outputs = baselines.audited(tenant, version, baseline_commit, promoted_run)
    mismatch = incomparable_reason(run.scores, baseline) if baseline is not None else None
    if mismatch:
        if not config.rescore_baseline:
            raise IncomparableScores(
                f"cannot compare {run.commit} with baseline {baseline_commit} on {tenant}/{version}: they were "
                f"scored differently ({mismatch}); allow re-scoring the baseline, or choose a baseline scored "
                "like this candidate"
            )
        context.log.warning(f"baseline {baseline_commit} was scored differently ({mismatch}): re-scoring its outputs")
        assert baseline_outputs is not None  # read with the baseline's scores
        baseline, rescoring = rescore(baseline_outputs, run.golden, run.scores, judge, embedder)
        baseline_source += f"; re-scored with this run's judge (it was scored differently: {mismatch})"
    comparison = compare(
        run.scores,
        baseline,
        tolerances,
        config.min_coverage,
        trust=trust,
        decide_on=config.decide_on,
        commits=(run.commit, baseline_commit),
    )
    analysis = analyse(comparison, run.scores, baseline, run.golden, run.outputs, baseline_outputs)
    promotion = promotion_reason(
        comparison.verdict, comparison.measured_enough, baseline is not None, config.promotion_policy()
    )
    if current is not None and current.commit == run.commit:
        promotion = None  # already the baseline: a second line in the history would say nothing new
    return Outcome(baseline_commit, baseline_source, comparison, analysis, promotion), rescoring


def rescore(
    outputs: pd.DataFrame, golden: pd.DataFrame, like: pd.DataFrame, judge: JudgeResource, embedder: EmbedderResource
) -> tuple[pd.DataFrame, cost.TokenCount]:
    """The archived outputs scored the way `like` was: this run's judge, k and metrics; and what that took."""
    identity = scoring_identity(like)
    scores, judgements = score_outputs(
        outputs, golden, judge.get(), embedder.get(), identity["metrics"], int(identity["k"])
    )
    still_different = incomparable_reason(like, scores)
    if still_different:
        raise IncomparableScores(f"re-scoring the baseline did not reproduce this run's scoring: {still_different}")
    return scores, sum((cost.TokenCount.of(counts) for counts in total_usage(judgements).values()), cost.TokenCount())


def _baseline_commit(current, requested: str) -> tuple[str, str]:
    """The commit to compare against and where it came from; ("", why) when there is none yet."""
    if requested:
        return requested, "asked for by the run"
    if current is None:
        return "", "none yet"
    return current.commit, f"current baseline since {current.promoted_at}: {current.reason}"
