"""context_recall CR = sentences of G supported by C / sentences of G (the Ragas library's metric)."""

from rag_eval_pipeline.core.judging.judgement import GROUND_TRUTH_SUPPORT, Judgement
from rag_eval_pipeline.core.judging.results import NO_GROUND_TRUTH_TO_RECALL, MetricResult
from rag_eval_pipeline.core.metrics.formulas import asked, failing_statements, supported_share
from rag_eval_pipeline.core.metrics.metric import Metric


def context_recall(judgement: Judgement) -> MetricResult:
    verdicts = asked(judgement.ground_truth_support, "the ground truth's support")
    return supported_share("context_recall", verdicts, NO_GROUND_TRUTH_TO_RECALL, "ground_truth")


METRIC = Metric(
    "context_recall",
    lambda s: context_recall(s.judgement),
    needs=(GROUND_TRUTH_SUPPORT,),
    position=50,
    description="share of the ground truth's sentences the retrieved contexts support",
    summary=lambda e: failing_statements(
        e.get("ground_truth", []), "{n} of {n} sentences found", "not in the contexts"
    ),
)
