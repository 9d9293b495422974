"""A golden-set version to review, laid out as the synthesis job leaves a published one: the golden set,
its chunks, its synthesis plan and earlier rejections, then the manifest."""

from __future__ import annotations

import pandas as pd

from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    REFUSAL,
    REJECTED_COLUMNS,
    SIMPLE,
    UNANSWERABLE,
    items_frame,
)
from rag_eval_pipeline.synthesis.pipeline import PLAN_COLUMNS
from rag_eval_pipeline.synthesis.quality import assess
from rag_eval_pipeline.synthesis.versions import publish
from rag_eval_pipeline_tests.synthesis_items import item_from

# Commas, double quotes, line breaks and non-ASCII text: what breaks a naive CSV.
CHUNKS = {
    "retention.md#0": 'RouteWise API request logs are retained for 90 days, then deleted.\nThe "audit" log is separate.',
    "retention.md#1": "Database backups of the shipment system are kept for 35 days in a separate region.",
    "travel.md#0": "The hotel cap is EUR 230 per night in Zürich, London and Paris.",
}
# What the synthesis planned per type: both types in earnest (MIN_PLANNED or more), so both must survive.
PLANNED = {SIMPLE: 3, UNANSWERABLE: 3}


def review_item(question_type, chunk_ids, question, ground_truth, chunks=None):
    return item_from(chunks or CHUNKS, question_type, chunk_ids, question, ground_truth)


LOGS = review_item(
    SIMPLE,
    ["retention.md#0"],
    'How long are API request logs, not the "audit" log, retained?',
    "They are retained for 90 days, then deleted.",
)
BACKUPS = review_item(
    SIMPLE, ["retention.md#1"], "How long are database backups kept?", "Backups are kept for 35 days."
)
HOTEL = review_item(SIMPLE, ["travel.md#0"], "What is the hotel cap in Zürich?", "The hotel cap is EUR 230 per night.")
TOKYO = review_item(UNANSWERABLE, ["travel.md#0"], "What is the per-diem for meals in Tokyo?", REFUSAL)
ITEMS = [LOGS, BACKUPS, HOTEL, TOKYO]


def golden_frame(items) -> pd.DataFrame:
    frame = items_frame(items)
    frame["round_trip_rank"] = [1 if len(ids) else -1 for ids in frame["gold_chunk_ids"]]
    frame["grounded"] = True
    # What the quality stage gives each kept question (a column of the golden set since that stage was added).
    frame["quality_score"] = [assess(q, t).score for q, t in zip(frame["question"], frame["question_type"])]
    return frame[GOLDEN_COLUMNS]


def plan_frame(planned: dict[str, int]) -> pd.DataFrame:
    rows = [
        {"question_type": t, "requested": n, "planned": n, "generated": n, "kept": n, "note": ""}
        for t, n in planned.items()
    ]
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def chunks_frame(chunks: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"chunk_id": list(chunks), "doc_id": [c.split("#")[0] for c in chunks], "text": list(chunks.values())}
    )


def lay_out_version(
    warehouse: Warehouse,
    tenant: str,
    version: str,
    golden: pd.DataFrame,
    *,
    chunks=None,
    planned=None,
    rejected: pd.DataFrame | None = None,
    published: bool = True,
) -> None:
    """The tables a synthesis of (tenant, version) writes; its manifest too when `published`."""
    warehouse.write(tenant, version, "golden_set", golden)
    if rejected is None:
        rejected = pd.DataFrame(
            [
                {
                    **golden.iloc[0][:-2].to_dict(),
                    "qa_id": "dropped-1",
                    "stage": "verification",
                    "reason": "duplicate question",
                }
            ],
            columns=REJECTED_COLUMNS,
        )
    warehouse.write(tenant, version, "rejected_qa", rejected)
    for name in ("raw_documents", "chunk_clusters"):
        warehouse.write(tenant, version, name, pd.DataFrame({"table": [name], "n": [1]}))
    warehouse.write(tenant, version, "document_chunks", chunks_frame(chunks or CHUNKS))
    warehouse.write(tenant, version, "synthesis_plan", plan_frame(planned or PLANNED))
    if published:
        publish(warehouse, tenant, version, golden)
