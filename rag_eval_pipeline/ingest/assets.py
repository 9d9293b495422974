"""Ingestion assets: the tenant's documents, then their chunks."""

from dataclasses import asdict, fields

import pandas as pd
from dagster import AssetExecutionContext, Config, Output

from rag_eval_pipeline.ingest.chunking import Chunk, ChunkingSettings, chunk_document
from rag_eval_pipeline.ingest.parsing import Document, read_documents
from rag_eval_pipeline.metadata import lineage_asset, lineage_multi_asset, lineage_table, table_metadata
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.resources import DocumentsResource, RunLivenessResource

CHUNK_COLUMNS = [f.name for f in fields(Chunk)]
REJECTION_COLUMNS = ["path", "reason"]
DOCUMENT_COLUMNS = [
    "doc_id",
    "path",
    "format",
    "title",
    "page_count",
    "n_chars",
    "furniture_lines",
    "content_hash",
    "pages",
]


@lineage_multi_asset(
    "raw_documents",
    "ingestion",
    {
        "raw_documents": lineage_table(
            "Every readable PDF, Markdown and text file of the tenant's document folder, with content hash, "
            "the number of running-header, footer and page-number lines removed from its pages (furniture_lines), "
            "page count and title. Unreadable files, and links (never followed out of the folder), go to the "
            "rejected_documents table with their reason."
        ),
        "rejected_documents": lineage_table(
            "The files of the tenant's document folder that could not be read (encrypted, corrupt, empty, "
            "image-only, not UTF-8, unsupported type), and links, pipes and devices (never followed): "
            "path and reason."
        ),
    },
)
def raw_documents(context: AssetExecutionContext, documents: DocumentsResource, run_liveness: RunLivenessResource):
    tenant, _ = split_key(context.partition_key)
    result = read_documents(documents.folder_for(tenant))
    frame = pd.DataFrame([_document_row(d) for d in result.documents], columns=DOCUMENT_COLUMNS)
    rejected = pd.DataFrame([asdict(r) for r in result.rejections], columns=REJECTION_COLUMNS)
    for rejection in result.rejections:
        context.log.warning(f"rejected {rejection.path}: {rejection.reason}")
    yield Output(
        frame,
        output_name="raw_documents",
        metadata=table_metadata(
            frame,
            ["doc_id", "format", "title", "page_count", "n_chars", "furniture_lines"],
            rejected_count=len(rejected),
            rejected=rejected.to_markdown(index=False) if len(rejected) else "none",
        ),
    )
    yield Output(rejected, output_name="rejected_documents", metadata=table_metadata(rejected, REJECTION_COLUMNS))


def _document_row(document: Document) -> dict:
    return {
        "doc_id": document.doc_id,
        "path": document.path,
        "format": document.format,
        "title": document.title,
        "page_count": len(document.pages),
        "n_chars": len(document.text),
        "furniture_lines": document.furniture_lines,
        "content_hash": document.content_hash,
        "pages": document.pages,
    }


class ChunkingConfig(Config):
    max_tokens: int = 180
    overlap_tokens: int = 30


@lineage_asset(
    "ingestion",
    "Structure-aware chunks (sections, paragraphs, pages) with stable ids <doc_id>#<n>.",
)
def document_chunks(
    config: ChunkingConfig, run_liveness: RunLivenessResource, raw_documents: pd.DataFrame
) -> Output[pd.DataFrame]:
    settings = ChunkingSettings(max_tokens=config.max_tokens, overlap_tokens=config.overlap_tokens)
    chunks = [
        asdict(chunk)
        for row in raw_documents.to_dict("records")
        for chunk in chunk_document(_as_document(row), settings)
    ]
    frame = pd.DataFrame(chunks, columns=CHUNK_COLUMNS)
    return Output(
        frame,
        metadata=table_metadata(
            frame,
            ["chunk_id", "heading", "n_tokens", "text"],
            documents=len(raw_documents),
            mean_tokens=float(round(frame["n_tokens"].mean(), 1)) if len(frame) else 0.0,
        ),
    )


def _as_document(row: dict) -> Document:
    return Document(
        doc_id=row["doc_id"],
        path=row["path"],
        format=row["format"],
        title=row["title"],
        pages=list(row["pages"]),
        content_hash=row["content_hash"],
    )
