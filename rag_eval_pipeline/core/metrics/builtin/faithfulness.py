"""faithfulness F = supported statements of A / statements of A (Es et al., "RAGAS", EACL 2024 demo
track, arXiv:2309.15217)."""

from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS, Judgement
from rag_eval_pipeline.core.judging.results import NO_ANSWER_STATEMENT, MetricResult
from rag_eval_pipeline.core.metrics.formulas import asked, failing_statements, supported_share
from rag_eval_pipeline.core.metrics.metric import Metric


def faithfulness(judgement: Judgement) -> MetricResult:
    verdicts = asked(judgement.answer_statements, "the answer's statements")
    return supported_share("faithfulness", verdicts, NO_ANSWER_STATEMENT, "statements")


METRIC = Metric(
    "faithfulness",
    lambda s: faithfulness(s.judgement),
    needs=(ANSWER_STATEMENTS,),
    position=30,
    description="share of the answer's statements the retrieved contexts support",
    summary=lambda e: failing_statements(e.get("statements", []), "{n} of {n} statements supported", "unsupported"),
)
