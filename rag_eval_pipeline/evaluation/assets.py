"""Auditing assets: the candidate's outputs over the golden set, then per-metric scores."""

import json
from dataclasses import asdict

import pandas as pd
from dagster import AssetExecutionContext, Config, Output
from pydantic import Field

from rag_eval_pipeline.evaluation.candidates import (
    Candidate,
    load_entry_point,
    read_outputs_file,
    run_candidate,
)
from rag_eval_pipeline.evaluation.judgement import total_usage
from rag_eval_pipeline.evaluation.llm_judge import CALL_SERVES
from rag_eval_pipeline.evaluation.metrics import ALL_METRICS, EvalItem, score_items
from rag_eval_pipeline.evaluation.reference_candidate import ReferenceCandidate
from rag_eval_pipeline.evaluation.results import MetricResult, unmeasured
from rag_eval_pipeline.metadata import lineage_asset, table_metadata
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource

REFERENCE = "reference"


class CandidateSettings(Config):
    candidate: str = Field(
        default=REFERENCE,
        description="'reference' (the shipped retriever), 'package.module:function', or a path to a JSONL outputs file.",
    )
    commit: str = Field(default="working-tree", description="The candidate's commit, recorded on every row.")
    top_k: int = Field(default=5, description="Chunks retrieved by the reference candidate.")
    timeout_s: float = Field(default=30.0, description="Longest wait for one answer before the item fails.")


@lineage_asset(
    "evaluation",
    "The candidate RAG pipeline's answer and ranked contexts for every golden question. "
    "A question on which the candidate raises or times out is a failed row, not a failed run.",
)
def candidate_outputs(
    context: AssetExecutionContext,
    config: CandidateSettings,
    embedder: EmbedderResource,
    golden_set: pd.DataFrame,
    document_chunks: pd.DataFrame,
) -> Output[pd.DataFrame]:
    items = golden_set[["qa_id", "question"]].to_dict("records")
    if config.candidate.endswith(".jsonl"):
        outputs = read_outputs_file(config.candidate, items)
    else:
        outputs = run_candidate(_candidate(config, embedder, document_chunks), items, config.timeout_s)
    frame = pd.DataFrame([asdict(o) for o in outputs])
    frame["candidate"], frame["commit"] = config.candidate, config.commit
    failed = frame[frame["status"] != "ok"]
    for row in failed.itertuples():
        context.log.warning(f"candidate failed on {row.qa_id}: {row.error}")
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["qa_id", "status", "answer", "error"],
            commit=config.commit,
            candidate=config.candidate,
            failed_items=len(failed),
            median_latency_s=float(frame["latency_s"].median()) if len(frame) else 0.0,
        ),
    )


def _candidate(config: CandidateSettings, embedder: EmbedderResource, chunks: pd.DataFrame) -> Candidate:
    if config.candidate == REFERENCE:
        return ReferenceCandidate(chunks["chunk_id"].tolist(), chunks["text"].tolist(), embedder.get(), config.top_k)
    return load_entry_point(config.candidate)


class ScoringSettings(Config):
    k: int = Field(default=5, description="Cut-off for hit rate@k and MRR.")
    metrics: list[str] = Field(default=list(ALL_METRICS), description="Metrics to compute.")


@lineage_asset(
    "evaluation",
    "One row per (golden item, metric): score in [0, 1] or 'unmeasured' with the reason, and the "
    "judge's evidence. Hit rate@k and MRR come from gold chunk ids; the rest from the judge.",
)
def metric_scores(
    config: ScoringSettings,
    judge: JudgeResource,
    embedder: EmbedderResource,
    golden_set: pd.DataFrame,
    candidate_outputs: pd.DataFrame,
) -> Output[pd.DataFrame]:
    active_judge = judge.get()
    gold = golden_set.set_index("qa_id")
    answered = candidate_outputs[candidate_outputs["status"] == "ok"]
    items = [_eval_item(output, gold.loc[output["qa_id"]]) for output in answered.to_dict("records")]
    results, judgements = score_items(items, active_judge, embedder.get(), config.metrics, config.k)
    scored = dict(zip(answered["qa_id"], results))
    rows = []
    for output in candidate_outputs.to_dict("records"):
        item_results = scored.get(output["qa_id"]) or [
            unmeasured(metric, f"candidate failed: {output['error']}") for metric in config.metrics
        ]
        rows += [_score_row(output, result, active_judge.name) for result in item_results]
    frame = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    measured = frame[frame["status"] == "ok"]
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["qa_id", "metric", "score", "status", "reason"],
            judge=active_judge.name,
            unmeasured=int((frame["status"] != "ok").sum()),
            means=measured.groupby("metric")["score"].mean().round(4).to_dict(),
            judge_usage={
                kind: {**counts, "serves": ", ".join(CALL_SERVES.get(kind, ()))}
                for kind, counts in total_usage(judgements).items()
            },
        ),
    )


SCORE_COLUMNS = ["qa_id", "metric", "score", "status", "reason", "evidence", "judge", "commit"]


def _eval_item(output: dict, gold: pd.Series) -> EvalItem:
    return EvalItem(
        qa_id=output["qa_id"],
        question=output["question"],
        answer=output["answer"],
        contexts=[dict(c) for c in output["contexts"]],
        ground_truth=gold["ground_truth"],
        gold_chunk_ids=list(gold["gold_chunk_ids"]),
    )


def _score_row(output: dict, result: MetricResult, judge_name: str) -> dict:
    return {
        "qa_id": output["qa_id"], "metric": result.metric, "score": result.score, "status": result.status,
        "reason": result.reason, "evidence": json.dumps(result.evidence, default=str),
        "judge": judge_name, "commit": output["commit"],
    }
