"""The metrics of the design documents, as pure functions of one item and a judge.

Formulas (seed 000, section 3; seed 003 for retrieval):
  faithfulness      F  = supported statements of A / statements of A
  answer_relevance  AR = relevance of A to Q as the judge measures it (0 for a noncommittal answer)
  context_recall    CR = ground-truth sentences supported by C / ground-truth sentences
  context_precision CP = sum_k P@k * I(k) / sum_k I(k), with I(k) = chunk k supports some ground-truth sentence
  hit_rate@k, mrr   from the gold chunk ids, no judge
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_eval_pipeline.evaluation.judge import Judge
from rag_eval_pipeline.evaluation.results import MetricResult, measured, unmeasured

RETRIEVAL_METRICS = ("hit_rate", "mrr")
JUDGED_METRICS = ("faithfulness", "answer_relevance", "context_recall", "context_precision")
ALL_METRICS = RETRIEVAL_METRICS + JUDGED_METRICS


@dataclass(frozen=True)
class EvalItem:
    qa_id: str
    question: str
    answer: str
    contexts: list[dict] = field(default_factory=list)  # [{"id": str, "text": str}, ...] in rank order
    ground_truth: str = ""
    gold_chunk_ids: list[str] = field(default_factory=list)

    @property
    def context_texts(self) -> list[str]:
        return [c["text"] for c in self.contexts]


def hit_rate(item: EvalItem, k: int) -> MetricResult:
    if not item.gold_chunk_ids:
        return unmeasured("hit_rate", "item has no gold chunk ids")
    top = [c["id"] for c in item.contexts[:k]]
    hit = bool(set(item.gold_chunk_ids) & set(top))
    return measured("hit_rate", 1.0 if hit else 0.0, k=k, retrieved=top, gold=list(item.gold_chunk_ids))


def mrr(item: EvalItem, k: int) -> MetricResult:
    if not item.gold_chunk_ids:
        return unmeasured("mrr", "item has no gold chunk ids")
    gold = set(item.gold_chunk_ids)
    rank = next((i + 1 for i, c in enumerate(item.contexts[:k]) if c["id"] in gold), None)
    return measured("mrr", 1.0 / rank if rank else 0.0, k=k, first_relevant_rank=rank)


def faithfulness(item: EvalItem, judge: Judge) -> MetricResult:
    statements = judge.statements(item.answer)
    if not statements:
        return unmeasured("faithfulness", "the answer makes no statement to verify")
    return _supported_share("faithfulness", statements, item, judge, "statements")


def answer_relevance(item: EvalItem, judge: Judge) -> MetricResult:
    if not item.answer.strip():
        return unmeasured("answer_relevance", "empty answer")
    score, evidence = judge.relevance_to_question(item.question, item.answer)
    return measured("answer_relevance", score, **evidence)


def context_recall(item: EvalItem, judge: Judge) -> MetricResult:
    sentences = judge.statements(item.ground_truth)
    if not sentences:
        return unmeasured("context_recall", "no ground-truth answer to recall")
    return _supported_share("context_recall", sentences, item, judge, "ground_truth")


def _supported_share(metric: str, statements: list[str], item: EvalItem, judge: Judge, evidence_key: str) -> MetricResult:
    """Share of statements the judge finds supported by the item's contexts, with every verdict as evidence."""
    verdicts = judge.verify(statements, item.context_texts)
    supported = sum(v.supported for v in verdicts)
    return measured(metric, supported / len(verdicts), **{evidence_key: [v.as_dict() for v in verdicts]})


def context_precision(item: EvalItem, judge: Judge) -> MetricResult:
    sentences = judge.statements(item.ground_truth)
    if not sentences:
        return unmeasured("context_precision", "no ground-truth answer to judge relevance against")
    relevant = [
        int(any(v.supported for v in judge.verify(sentences, [text]))) for text in item.context_texts
    ]
    return measured("context_precision", average_precision(relevant), relevance=relevant)


def average_precision(relevant: list[int]) -> float:
    """Rank-aware precision of the relevant chunks; 0 when none is relevant."""
    hits, total = 0, 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def score_item(item: EvalItem, judge: Judge, k: int = 5, metrics: tuple[str, ...] = ALL_METRICS) -> list[MetricResult]:
    scorers = {
        "hit_rate": lambda: hit_rate(item, k),
        "mrr": lambda: mrr(item, k),
        "faithfulness": lambda: faithfulness(item, judge),
        "answer_relevance": lambda: answer_relevance(item, judge),
        "context_recall": lambda: context_recall(item, judge),
        "context_precision": lambda: context_precision(item, judge),
    }
    unknown = set(metrics) - scorers.keys()
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: {', '.join(ALL_METRICS)}")
    return [scorers[name]() for name in metrics]
