"""chunk_clusters says how far it has got: embedding batches as they are cached, then each later phase."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from dagster import materialize

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.synthesis import pipeline

TEXTS = [f"Shipment {i} of Halcyon Freight leaves the Venlo dock at {i + 6}:00 every weekday." for i in range(9)]
CHUNKS = pd.DataFrame(
    [{"chunk_id": f"a.md#{i}", "doc_id": "a.md", "position": i, "heading": "", "text": t} for i, t in enumerate(TEXTS)]
)
LATER_PHASES = ["clustered: ", "cluster labels ready", "test nodes ranked"]


def _in_order(messages: list[str], phases: list[str]) -> bool:
    """Each phase appears in a message that comes after the previous phase's."""
    rest = iter(messages)
    return all(any(phase in message for message in rest) for phase in phases)


def test_test_nodes_logs_the_embedding_batches_and_every_later_phase(caplog):
    log = logging.getLogger("test.chunk_clusters")

    with caplog.at_level(logging.INFO, logger=log.name):
        pipeline.test_nodes(CHUNKS, Embedder(batch_size=4), log=log)

    messages = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert _in_order(
        messages,
        ["new texts, batch 1/3", "embedded 9/9 new texts, batch 3/3", "embeddings of 9 chunks ready", *LATER_PHASES],
    ), messages
    assert all(m.endswith(" s left") and "texts/s" in m for m in messages if m.startswith("embedded "))


@pytest.mark.dagster
def test_the_asset_logs_its_progress_to_the_run_log(instance, acme_key, resources):
    result = materialize(
        ALL_ASSETS,
        selection=["raw_documents", "rejected_documents", "document_chunks", "chunk_clusters"],
        partition_key=acme_key,
        instance=instance,
        resources=resources,
    )

    assert result.success
    messages = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.step_key == "chunk_clusters"]
    assert _in_order(messages, ["new texts, batch 1/", "embeddings of ", *LATER_PHASES]), messages
