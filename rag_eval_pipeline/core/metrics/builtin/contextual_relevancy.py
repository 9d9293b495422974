"""contextual_relevancy CRel = statements of C relevant to Q / statements of C (DeepEval's metric of
that name)."""

from rag_eval_pipeline.core.judging.judgement import CONTEXT_RELEVANCE, Judgement
from rag_eval_pipeline.core.judging.results import NO_CONTEXT_STATEMENT, MetricResult
from rag_eval_pipeline.core.metrics.formulas import asked, failing_statements, supported_share
from rag_eval_pipeline.core.metrics.metric import Metric


def contextual_relevancy(judgement: Judgement) -> MetricResult:
    verdicts = asked(judgement.context_relevance, "the contexts' relevance")
    return supported_share("contextual_relevancy", verdicts, NO_CONTEXT_STATEMENT, "context_statements")


METRIC = Metric(
    "contextual_relevancy",
    lambda s: contextual_relevancy(s.judgement),
    needs=(CONTEXT_RELEVANCE,),
    position=70,
    description="share of the retrieved contexts' statements relevant to the question",
    summary=lambda e: failing_statements(
        e.get("context_statements", []), "{n} of {n} context statements relevant", "irrelevant"
    ),
)
