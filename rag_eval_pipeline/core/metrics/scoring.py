"""Scoring items: one batch of judge calls for every item, one batch of embeddings, then each metric's
formula per item. The one path behind `rag-eval evaluate`, the metric_scores asset, calibration, the
Python API and the pytest plugin."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Judgement
from rag_eval_pipeline.core.judging.results import MetricResult
from rag_eval_pipeline.core.metrics.metric import Metric, Scoring
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS, embedded_texts, needed_judgements, resolve

Scored = tuple[list[list[MetricResult]], list[Judgement]]


def score_items(
    items: list[EvalItem], judge, embedder: Embedder, metrics: Iterable[str | Metric] = BUILTIN_METRICS, k: int = 5
) -> Scored:
    """(results per item, judgements): the judge answers what the metrics need, then the formulas run."""
    chosen = resolve(metrics)
    needs = needed_judgements(chosen)
    judgements = judge.judge_many(items, needs) if needs else [Judgement() for _ in items]
    return score_judgements(items, judgements, embedder, chosen, k), judgements


async def ascore_items(
    items: list[EvalItem], judge, embedder: Embedder, metrics: Iterable[str | Metric] = BUILTIN_METRICS, k: int = 5
) -> Scored:
    """score_items for an event loop: the LLM judge's calls run on it; CPU work runs in a worker thread."""
    chosen = resolve(metrics)
    needs = needed_judgements(chosen)
    if not needs:
        judgements = [Judgement() for _ in items]
    elif hasattr(judge, "ajudge_many"):
        judgements = await judge.ajudge_many(items, needs)
    else:
        judgements = await asyncio.to_thread(judge.judge_many, items, needs)
    results = await asyncio.to_thread(score_judgements, items, judgements, embedder, chosen, k)
    return results, judgements


def score_judgements(
    items: Sequence[EvalItem], judgements: Sequence[Judgement], embedder: Embedder, metrics: Sequence[Metric], k: int
) -> list[list[MetricResult]]:
    """Every metric for every item, from judgements that hold what the metrics need."""
    texts = embedded_texts(metrics, items, judgements)
    if texts:  # one batched call; each formula then reads the embedder's cache
        embedder.embed(texts)
    return [
        [metric.score(Scoring(item, judgement, embedder, k)) for metric in metrics]
        for item, judgement in zip(items, judgements)
    ]
