"""The one place a run's config is built, for the CLI, the sensors and the schedules.

Every op's config is the asset's own Config class, so a field renamed or mistyped there fails here,
in Python, rather than as a config error at launch.
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import Config, RunConfig

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation.jobs import (
    AUDIT_ASSETS,
    SYNTHESIS_ASSETS,
    audit_job,
    full_pipeline_job,
    synthesis_job,
)
from rag_eval_pipeline.core.defaults import DEFAULT_COMMIT
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
from rag_eval_pipeline.core.names import validate_commit
from rag_eval_pipeline.evaluation.assets import CandidateConfig, ScoringConfig
from rag_eval_pipeline.evaluation.candidates import REFERENCE_SPEC, CandidateError, CandidateSpec
from rag_eval_pipeline.ingest.assets import ChunkingConfig
from rag_eval_pipeline.reporting.assets import ReportConfig
from rag_eval_pipeline.synthesis.assets import SynthesisConfig, VerificationConfig

# The assets each job materializes: only their ops may be configured (Dagster refuses config for others).
JOB_ASSETS: dict[str, tuple[str, ...]] = {
    full_pipeline_job.name: (*SYNTHESIS_ASSETS, *AUDIT_ASSETS),
    synthesis_job.name: tuple(SYNTHESIS_ASSETS),
    audit_job.name: tuple(AUDIT_ASSETS),
}


def lineage_run_config(
    job_name: str,
    candidate: CandidateSpec | None = None,
    commit: str = DEFAULT_COMMIT,
    report: ReportConfig | None = None,
    log_level: str | None = "WARNING",
    chunking: ChunkingConfig | None = None,
    synthesis: SynthesisConfig | None = None,
    verification: VerificationConfig | None = None,
    metrics: Sequence[str] | None = None,
) -> RunConfig:
    """The run config of one lineage job; ops the job does not materialize are left out.

    candidate and commit configure `candidate_outputs` (the reference candidate when candidate is
    None); report, chunking, synthesis and verification their assets' Config (their defaults when None);
    metrics the metric set `metric_scores` computes (None: RAG_EVAL_METRICS, else every built-in metric).
    log_level sets the console logger (None: Dagster's default, every event).
    ValueError (one line) for an unknown job, a malformed commit, or an outputs file: the config names
    outputs only by their submission id (evaluation/submissions.py submits a file first), so the run's
    records never hold a tenant's answers.

    Example:
        >>> config = lineage_run_config(
        ...     "audit", CandidateSpec.parse("my_rag.pipeline:answer"), commit="3f2a9c1",
        ...     report=ReportConfig(branch="main"), log_level=None,
        ... )
        >>> config.ops["candidate_outputs"].candidate, config.ops["regression_report"].branch
        ('my_rag.pipeline:answer', 'main')
        >>> sorted(lineage_run_config("synthesis").ops)
        []
    """
    if job_name not in JOB_ASSETS:
        raise ValueError(f"unknown job {job_name!r}: expected one of {', '.join(JOB_ASSETS)}")
    candidate = candidate or REFERENCE_SPEC
    if candidate.kind == "outputs_file" and "candidate_outputs" in JOB_ASSETS[job_name]:
        raise CandidateError(
            f"outputs file {candidate.value} must be submitted to the results store before its run is "
            "configured (evaluation.submissions.submitted)"
        )
    audited = CandidateConfig(candidate=str(candidate), commit=validate_commit(commit))
    configs: dict[str, Config | None] = {
        "document_chunks": chunking,
        "synthetic_qa": synthesis,
        "golden_set": verification,
        "candidate_outputs": audited,
        "metric_scores": ScoringConfig(metrics=list(metrics or settings.load().metrics or BUILTIN_METRICS)),
        "regression_report": report or ReportConfig(),
    }
    selected = JOB_ASSETS[job_name]
    ops = {name: value for name, value in configs.items() if value is not None and name in selected}
    loggers = {"console": {"config": {"log_level": log_level}}} if log_level else None
    return RunConfig(ops=ops, loggers=loggers)
