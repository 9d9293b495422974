"""context_precision CP = sum_k P@k * I(k) / sum_k I(k), I(k) = chunk k relevant to G; 0 if none is
(the Ragas library's metric)."""

from rag_eval_pipeline.core.judging.judgement import CHUNK_RELEVANCE, Failure, Judgement
from rag_eval_pipeline.core.judging.results import MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.formulas import asked, average_precision
from rag_eval_pipeline.core.metrics.metric import Metric

NO_CONTEXT = "none"


def context_precision(judgement: Judgement) -> MetricResult:
    relevance = asked(judgement.chunk_relevance, "the chunks' relevance")
    if isinstance(relevance, Failure):
        return unmeasured("context_precision", relevance.reason)
    return measured("context_precision", average_precision(relevance), relevance=list(relevance))


def _summary(evidence: dict) -> str:
    ranks = [str(n) for n, relevant in enumerate(evidence.get("relevance", []), start=1) if relevant]
    return f"judged relevant: {','.join(ranks) or NO_CONTEXT}"


METRIC = Metric(
    "context_precision",
    lambda s: context_precision(s.judgement),
    needs=(CHUNK_RELEVANCE,),
    position=60,
    description="rank-aware precision of the retrieved chunks relevant to the ground truth",
    summary=_summary,
)
