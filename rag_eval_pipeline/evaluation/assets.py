"""Auditing assets: the candidate's outputs over the golden set, then per-metric scores."""

from dataclasses import asdict

import pandas as pd
from dagster import AssetExecutionContext, Config, Output
from pydantic import Field

from rag_eval_pipeline.core.defaults import DEFAULT_COMMIT
from rag_eval_pipeline.core.judging.judgement import total_usage
from rag_eval_pipeline.core.judging.llm_judge import call_serves
from rag_eval_pipeline.core.judging.results import OK
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS, scoring_name
from rag_eval_pipeline.core.names import COMMIT_TAG, validate_commit
from rag_eval_pipeline.core.retrieval import ReferenceCandidate
from rag_eval_pipeline.evaluation.candidate_process import run_entry_point
from rag_eval_pipeline.evaluation.candidates import (
    REFERENCE,
    CandidateError,
    CandidatePipeline,
    CandidateSpec,
    outputs_from_text,
    run_candidate,
)
from rag_eval_pipeline.evaluation.scoring import score_outputs
from rag_eval_pipeline.evaluation.submissions import read_submitted
from rag_eval_pipeline.evaluation.trends import score_trends
from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics
from rag_eval_pipeline.metadata import lineage_asset, table_metadata
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource, RunLivenessResource, WarehouseResource
from rag_eval_pipeline.stores.layout import audited_commit
from rag_eval_pipeline.synthesis.versions import require_published


class CandidateConfig(Config):
    candidate: str = Field(
        default=REFERENCE,
        description="'reference' (the shipped retriever), 'package.module:function', or "
        "'submitted-outputs:<id>' (outputs submitted to this tenant's results store before the run, which "
        "the run reads from there): the text form of a CandidateSpec.",
    )
    commit: str = Field(default=DEFAULT_COMMIT, description="The candidate's commit, recorded on every row.")
    top_k: int = Field(default=5, description="Chunks retrieved by the reference candidate.")
    timeout_s: float = Field(default=30.0, description="Longest wait for one answer before the item fails.")


@lineage_asset(
    "evaluation",
    "The candidate RAG pipeline's answer and ranked contexts for every golden question. "
    "A question on which the candidate raises or times out is a failed row, not a failed run.",
)
def candidate_outputs(
    context: AssetExecutionContext,
    config: CandidateConfig,
    embedder: EmbedderResource,
    warehouse: WarehouseResource,
    run_liveness: RunLivenessResource,
    golden_set: pd.DataFrame,
    document_chunks: pd.DataFrame,
) -> Output[pd.DataFrame]:
    commit, spec = validate_commit(config.commit), CandidateSpec.parse(config.candidate)
    tenant, version = split_key(context.partition_key)
    require_published(warehouse.store(), tenant, version, golden_set)  # never audit a half-made golden set
    items = golden_set[["qa_id", "question"]].to_dict("records")
    outputs = _outputs(spec, config, embedder, warehouse, tenant, version, items, document_chunks)
    frame = pd.DataFrame([asdict(o) for o in outputs])
    frame["candidate"], frame["commit"] = config.candidate, commit
    failed = frame[frame["status"] != OK]
    for row in failed.itertuples():
        context.log.warning(f"candidate failed on {row.qa_id}: {row.error}")
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["qa_id", "status", "error"],  # no answers: Dagster's event log is the operator's, not the tenant's
            commit=commit,
            candidate=config.candidate,
            failed_items=len(failed),
            median_latency_s=float(frame["latency_s"].median()) if len(frame) else 0.0,
        ),
    )


def _outputs(spec, config: CandidateConfig, embedder, warehouse, tenant: str, version: str, items, chunks):
    """The candidate's answer to every golden question, however the candidate is given."""
    if spec.kind == "submitted_outputs":
        # From the store of this run's own tenant and version: another tenant's submission is not found there.
        return outputs_from_text(read_submitted(warehouse.store(), tenant, version, spec), items)
    if spec.kind == "outputs_file":
        raise CandidateError(
            f"outputs file {spec.value} is not read by the run: submit it first (`rag-eval gate --outputs`), "
            "then audit the 'submitted-outputs:<id>' it gets"
        )
    if spec.kind == "entry_point":
        # Someone else's code: in a child process, where os._exit, a crash or a hang fails items, not the audit.
        return run_entry_point(spec.value, items, config.timeout_s)
    return run_candidate(_reference(config.top_k, embedder, chunks), items, config.timeout_s)


def _reference(top_k: int, embedder: EmbedderResource, chunks: pd.DataFrame) -> CandidatePipeline:
    """The shipped pipeline: our own code, run in this process with the loaded embedding model."""
    return ReferenceCandidate(chunks["chunk_id"].tolist(), chunks["text"].tolist(), embedder.get(), top_k)


class ScoringConfig(Config):
    k: int = Field(default=5, ge=1, description="Cut-off for hit rate@k and MRR.")
    metrics: list[str] = Field(
        default=list(BUILTIN_METRICS),
        description="Metrics to compute: built-in names, 'package.module:function' of the team's own (in a package "
        "RAG_EVAL_CANDIDATE_MODULES allows) or an installed entry point's name.",
    )


@lineage_asset(
    "evaluation",
    "One row per (golden item, metric): score in [0, 1] or 'unmeasured' with the reason, and the "
    "judge's evidence. Hit rate@k and MRR come from gold chunk ids; the rest from the judge.",
)
def metric_scores(
    context: AssetExecutionContext,
    config: ScoringConfig,
    judge: JudgeResource,
    embedder: EmbedderResource,
    run_liveness: RunLivenessResource,
    golden_set: pd.DataFrame,
    candidate_outputs: pd.DataFrame,
) -> Output[pd.DataFrame]:
    commit = audited_commit(context.run.tags.get(COMMIT_TAG), candidate_outputs)
    active_judge, metrics = judge.get(), resolve_metrics(config.metrics)
    frame, judgements = score_outputs(candidate_outputs, golden_set, active_judge, embedder.get(), metrics, config.k)
    served = call_serves(metrics)
    measured = frame[frame["status"] == OK]
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["qa_id", "metric", "score", "status", "reason"],
            commit=commit,
            judge=scoring_name(active_judge.name, metrics),
            k=config.k,
            unmeasured=int((frame["status"] != OK).sum()),
            means=measured.groupby("metric")["score"].mean().round(4).to_dict(),
            **score_trends(frame),  # mean/, measured/, coverage/<metric>: numbers the UI plots across runs
            judge_usage={
                kind: {**counts, "serves": ", ".join(served.get(kind, ()))}
                for kind, counts in total_usage(judgements).items()
            },
        ),
    )
