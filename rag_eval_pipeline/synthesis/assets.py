"""Synthesis assets: test nodes among the clustered chunks, synthetic QA, and the verified golden set."""

import pandas as pd
from dagster import AssetExecutionContext, AssetKey, Config, Output
from pydantic import Field

from rag_eval_pipeline.core.defaults import GeneratorKind
from rag_eval_pipeline.metadata import lineage_asset, lineage_multi_asset, lineage_table, table_metadata
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource, RunLivenessResource, WarehouseResource
from rag_eval_pipeline.synthesis import pipeline
from rag_eval_pipeline.synthesis.planning import DEFAULT_MIX
from rag_eval_pipeline.synthesis.verification import VerificationSettings
from rag_eval_pipeline.synthesis.versions import check_publishable

REJECTION_PREVIEW = ["qa_id", "question_type", "stage", "reason"]


@lineage_asset(
    "synthesis",
    "Chunks grouped by meaning (all-MiniLM-L6-v2 embeddings cached by content hash batch by batch, so an "
    "interrupted run keeps what it computed; HDBSCAN scaled to the corpus; cluster -1 holds the outliers), "
    "each cluster labelled with its top terms, and each chunk's information score and test-node rank (the "
    "order questions are written from). The run log shows embedding progress and each later phase.",
)
def chunk_clusters(
    context: AssetExecutionContext,
    embedder: EmbedderResource,
    run_liveness: RunLivenessResource,
    document_chunks: pd.DataFrame,
) -> Output[pd.DataFrame]:
    model = embedder.get()
    hits_before, misses_before = model.cache_hits, model.cache_misses
    frame = pipeline.test_nodes(document_chunks, model, log=context.log)
    labels = (
        frame.groupby("cluster_id").agg(label=("cluster_label", "first"), chunks=("chunk_id", "size")).reset_index()
    )
    nodes = frame[frame["test_node_rank"] > 0]
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["chunk_id", "cluster_id", "cluster_label", "test_node_rank"],
            clusters=int((labels["cluster_id"] >= 0).sum()),
            outliers=int(frame["is_outlier"].sum()),
            test_nodes=len(nodes),
            cluster_labels=labels.to_markdown(index=False) if len(labels) else "none",
            embedding_cache_hits=model.cache_hits - hits_before,
            embedding_cache_misses=model.cache_misses - misses_before,
        ),
    )


class SynthesisConfig(Config):
    n_items: int = Field(default=40, description="Items to generate before verification.")
    type_mix: dict[str, float] = Field(
        default=DEFAULT_MIX, description="Share of each question type: simple, reasoning, multi_context, unanswerable."
    )
    generator: GeneratorKind = Field(
        default="offline",
        description="'offline' (embedded templates: simple, multi_context, unanswerable) or 'llm' (all four "
        "types, through the judge resource's OpenAI-compatible server).",
    )


@lineage_multi_asset(
    "synthetic_qa",
    "synthesis",
    {
        "synthetic_qa": lineage_table(
            "Candidate QA items of four types (simple, reasoning, multi_context, unanswerable), written from "
            "the test nodes: question, ground-truth answer, gold chunk ids and texts, type, source cluster, "
            "generator and prompt version. Not yet verified; tasks the generator failed on go to "
            "generation_failures with their reason."
        ),
        "generation_failures": lineage_table(
            "The generation tasks the generator failed on, as rows of the rejected table: the task's "
            "source chunks and type where known, stage generation and the reason. Verification adds them "
            "to rejected_qa."
        ),
        "generation_plan": lineage_table(
            "Per question type, the items requested by the type mix, planned (what the corpus and the "
            "generator allow) and generated, with a note on any shortfall. Verification adds the kept "
            "counts in synthesis_plan."
        ),
    },
)
def synthetic_qa(
    context: AssetExecutionContext,
    config: SynthesisConfig,
    judge: JudgeResource,
    run_liveness: RunLivenessResource,
    raw_documents: pd.DataFrame,
    document_chunks: pd.DataFrame,
    chunk_clusters: pd.DataFrame,
):
    titles = dict(zip(raw_documents["doc_id"], raw_documents["title"]))
    generator = pipeline.build_generator(
        config.generator,
        document_chunks["text"].tolist(),
        judge.llm_settings,
        judge.cache_path or None,
        tenant=split_key(context.partition_key)[0],  # the run's own partition: its cache namespace
    )
    items, failures, plan = pipeline.synthesize(
        document_chunks, chunk_clusters, titles, generator, config.n_items, config.type_mix
    )
    yield Output(
        items,
        output_name="synthetic_qa",
        metadata=table_metadata(
            items,
            ["qa_id", "question_type", "question", "ground_truth"],
            generator=generator.name,
            # Calls, tokens and cache hits of an LLM generator; the offline one makes no calls.
            generator_usage=getattr(generator, "usage", None) or {},
            generation_failures=len(failures),
            plan=plan.to_markdown(index=False),
        ),
    )
    yield Output(failures, output_name="generation_failures", metadata=table_metadata(failures, REJECTION_PREVIEW))
    yield Output(plan, output_name="generation_plan", metadata=table_metadata(plan, list(plan.columns)))


class VerificationConfig(Config):
    round_trip_k: int = Field(default=5, description="Top k of the round-trip retrieval check.")
    drop_on_retrieval_miss: bool = Field(
        default=False, description="Drop items whose gold chunk the reference retriever misses."
    )
    near_duplicate_cosine: float = Field(
        default=0.95, description="Questions at least this similar to a kept one are dropped."
    )


@lineage_multi_asset(
    "golden_set",
    "synthesis",
    {
        "golden_set": lineage_table(
            "The verified golden set, published once per (tenant, dataset_version) when its blocking check "
            "passes, and immutable after: items whose ground truth the judge finds supported by their gold "
            "chunks, well formed, not leaking their answer, not near-duplicates; each with its round-trip "
            "retrieval rank and its quality score (0 to 1: sort by it to review the weakest questions first). "
            "Dropped items and failed generation tasks go to rejected_qa."
        ),
        "rejected_qa": lineage_table(
            "Every candidate that did not make the golden set, with the stage (generation, quality, or the "
            "verification step that dropped it) and the reason."
        ),
        "synthesis_plan": lineage_table(
            "Per question type: items requested by the type mix, planned, generated and kept after "
            "verification, with a note on any shortfall. The golden set's check requires every type "
            "planned in earnest to keep an item."
        ),
    },
    # Which tables each output is made from: the graph draws these edges, not all inputs to all outputs.
    internal_asset_deps={
        "golden_set": {AssetKey("synthetic_qa"), AssetKey("document_chunks")},
        "rejected_qa": {AssetKey("synthetic_qa"), AssetKey("generation_failures"), AssetKey("document_chunks")},
        "synthesis_plan": {AssetKey("synthetic_qa"), AssetKey("generation_plan"), AssetKey("document_chunks")},
    },
)
def golden_set(
    context: AssetExecutionContext,
    config: VerificationConfig,
    judge: JudgeResource,
    embedder: EmbedderResource,
    warehouse: WarehouseResource,
    run_liveness: RunLivenessResource,
    synthetic_qa: pd.DataFrame,
    generation_failures: pd.DataFrame,
    generation_plan: pd.DataFrame,
    document_chunks: pd.DataFrame,
):
    tenant, version = split_key(context.partition_key)
    settings = VerificationSettings(config.round_trip_k, config.drop_on_retrieval_miss, config.near_duplicate_cosine)
    golden, rejected, plan = pipeline.verify(
        synthetic_qa,
        generation_failures,
        generation_plan,
        document_chunks,
        judge.get(),
        embedder.get(),
        settings,
    )
    # Refuses a changed golden set for a published version before any table is written. Publishing
    # (the manifest) is left to the blocking golden_set_expectations check, once it passes.
    digest = check_publishable(warehouse.store(), tenant, version, golden)
    yield Output(
        golden,
        output_name="golden_set",
        metadata=table_metadata(
            golden,
            ["qa_id", "question_type", "quality_score", "question"],
            **_golden_metadata(golden, synthetic_qa, rejected, plan, config.round_trip_k, digest),
        ),
    )
    yield Output(rejected, output_name="rejected_qa", metadata=table_metadata(rejected, REJECTION_PREVIEW))
    yield Output(plan, output_name="synthesis_plan", metadata=table_metadata(plan, list(plan.columns)))


def _golden_metadata(golden, synthetic_qa, rejected, plan, k: int, content_hash: str) -> dict:
    answerable = golden[golden["round_trip_rank"] >= 0]
    by_stage = rejected.groupby("stage").size().to_dict() if len(rejected) else {}
    return {
        "kept_rate": round(len(golden) / len(synthetic_qa), 4) if len(synthetic_qa) else 0.0,
        "quality_score_median": float(golden["quality_score"].median()) if len(golden) else 0.0,
        "rejected_count": len(rejected),
        "rejected_by_stage": {str(s): int(n) for s, n in by_stage.items()},
        f"gold_in_top_{k}_share": round(float((answerable["round_trip_rank"] > 0).mean()), 4)
        if len(answerable)
        else 0.0,
        "type_mix": plan.to_markdown(index=False),
        "content_hash": content_hash,
        "rejected": rejected[["qa_id", "stage", "reason"]].head(50).to_markdown(index=False)
        if len(rejected)
        else "none",
    }
