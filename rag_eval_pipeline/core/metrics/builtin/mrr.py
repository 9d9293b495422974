"""mrr@k = 1 / rank of the first gold chunk among the top k retrieved, 0 if none (no judge)."""

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import NO_GOLD_IDS, MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.metric import Metric


def mrr(item: EvalItem, k: int) -> MetricResult:
    if not item.gold_chunk_ids:
        return unmeasured("mrr", NO_GOLD_IDS)
    gold = set(item.gold_chunk_ids)
    rank = next((i + 1 for i, c in enumerate(item.contexts[:k]) if c["id"] in gold), None)
    return measured("mrr", 1.0 / rank if rank else 0.0, k=k, first_relevant_rank=rank)


METRIC = Metric(
    "mrr", lambda s: mrr(s.item, s.k), position=20, description="1 / rank of the first gold chunk in the top k"
)
