"""QA items for tests, built the way the generators build them (make_item), from chunk texts given inline."""

from rag_eval_pipeline.synthesis.items import GenerationTask, QAItem, SourceChunk, make_item


def item_from(
    chunks: dict[str, str], question_type: str, chunk_ids: list[str], question: str, ground_truth: str
) -> QAItem:
    """An item written from `chunk_ids` (keys of `chunks`, named "<doc>.<ext>#<n>") by the offline generator."""
    sources = tuple(SourceChunk(c, c.split("#")[0], c.split(".")[0], "", chunks[c]) for c in chunk_ids)
    return make_item(
        GenerationTask(question_type, sources, cluster_id=0), question, ground_truth, "offline-template", "p1"
    )
