"""Synthesis assets: clusters of chunks, synthetic QA, and the verified golden set."""

import pandas as pd
from dagster import AssetExecutionContext, Config, Output

from rag_eval_pipeline.metadata import lineage_asset, table_metadata
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource, WarehouseResource
from rag_eval_pipeline.synthesis.clustering import cluster_chunks
from rag_eval_pipeline.synthesis.generation import generate_offline, items_frame
from rag_eval_pipeline.synthesis.verification import verify_items


@lineage_asset(
    "synthesis",
    "Chunks grouped by meaning: all-MiniLM-L6-v2 embeddings (cached by content hash) clustered "
    "with HDBSCAN; cluster -1 holds the outliers.",
)
def chunk_clusters(embedder: EmbedderResource, document_chunks: pd.DataFrame) -> Output[pd.DataFrame]:
    model = embedder.get()
    hits_before, misses_before = model.cache_hits, model.cache_misses
    vectors = model.embed(document_chunks["text"].tolist())
    frame = cluster_chunks(document_chunks["chunk_id"].tolist(), vectors)
    sizes = frame[~frame["is_outlier"]].groupby("cluster_id").size()
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["chunk_id", "cluster_id", "membership"],
            clusters=int(len(sizes)),
            outliers=int(frame["is_outlier"].sum()),
            embedding_cache_hits=model.cache_hits - hits_before,
            embedding_cache_misses=model.cache_misses - misses_before,
        ),
    )


class SynthesisSettings(Config):
    max_items: int = 40


@lineage_asset(
    "synthesis",
    "Candidate QA items from the offline template generator: question, ground-truth answer, "
    "gold chunk ids, question type and source cluster. Not yet verified.",
)
def synthetic_qa(
    config: SynthesisSettings,
    raw_documents: pd.DataFrame,
    document_chunks: pd.DataFrame,
    chunk_clusters: pd.DataFrame,
) -> Output[pd.DataFrame]:
    titles = dict(zip(raw_documents["doc_id"], raw_documents["title"]))
    frame = items_frame(generate_offline(document_chunks, chunk_clusters, titles, config.max_items))
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["qa_id", "question_type", "question", "ground_truth"],
            by_template=frame["template"].value_counts().to_dict() if len(frame) else {},
        ),
    )


@lineage_asset(
    "synthesis",
    "The verified golden set: synthetic items whose ground truth is supported by their gold chunks, "
    "well formed and distinct. Dropped items go to the rejected_qa table with their reason.",
)
def golden_set(
    context: AssetExecutionContext,
    judge: JudgeResource,
    warehouse: WarehouseResource,
    synthetic_qa: pd.DataFrame,
    document_chunks: pd.DataFrame,
) -> Output[pd.DataFrame]:
    tenant, version = split_key(context.partition_key)
    kept, rejected = verify_items(synthetic_qa, set(document_chunks["chunk_id"]), judge.support_checker())
    warehouse.store().write(tenant, version, "rejected_qa", rejected)
    kept_rate = round(len(kept) / len(synthetic_qa), 4) if len(synthetic_qa) else 0.0
    return Output(
        kept,
        metadata=table_metadata(
            kept,
            ["qa_id", "question", "gold_chunk_ids"],
            rejected_count=len(rejected),
            kept_rate=kept_rate,
            rejected=rejected[["qa_id", "reason"]].to_markdown(index=False) if len(rejected) else "none",
        ),
    )
