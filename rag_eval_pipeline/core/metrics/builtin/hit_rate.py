"""hit_rate@k = 1 if a gold chunk is among the top k retrieved, else 0 (from the gold chunk ids, no judge)."""

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import NO_GOLD_IDS, MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.metric import Metric


def hit_rate(item: EvalItem, k: int) -> MetricResult:
    if not item.gold_chunk_ids:
        return unmeasured("hit_rate", NO_GOLD_IDS)
    top = [c["id"] for c in item.contexts[:k]]
    hit = bool(set(item.gold_chunk_ids) & set(top))
    return measured("hit_rate", 1.0 if hit else 0.0, k=k, retrieved=top, gold=list(item.gold_chunk_ids))


METRIC = Metric(
    "hit_rate", lambda s: hit_rate(s.item, s.k), position=10, description="a gold chunk among the top k retrieved"
)
