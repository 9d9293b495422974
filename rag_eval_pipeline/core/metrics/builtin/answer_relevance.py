"""answer_relevance AR = mean_i cos(e_Q, e_q'_i) over questions q'_i generated from A; 0 if A is
noncommittal (Es et al., "RAGAS"). The cosine is clipped at 0 so the score lies in [0, 1]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import GENERATED_QUESTIONS, Failure, GeneratedQuestions, Judgement
from rag_eval_pipeline.core.judging.results import EMPTY_ANSWER, MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.formulas import asked, clipped_cosines
from rag_eval_pipeline.core.metrics.metric import Metric

if TYPE_CHECKING:
    from rag_eval_pipeline.core.embeddings import Embedder


def answer_relevance(item: EvalItem, judgement: Judgement, embedder: Embedder) -> MetricResult:
    generated = asked(judgement.generated_questions, "questions generated from the answer")
    if isinstance(generated, Failure):
        return unmeasured("answer_relevance", generated.reason)
    if not item.answer.strip():
        return unmeasured("answer_relevance", EMPTY_ANSWER)
    if generated.noncommittal:
        return measured("answer_relevance", 0.0, noncommittal=True, method=generated.method)
    if not generated.questions:
        return unmeasured("answer_relevance", "no question could be generated from the answer")
    cosines = clipped_cosines(embedder, item.question, generated.questions)
    return measured(
        "answer_relevance",
        float(cosines.mean()),
        generated_questions=generated.questions,
        cosines=[round(float(c), 4) for c in cosines],
        method=generated.method,
    )


def _embeds(item: EvalItem, judgement: Judgement) -> list[str]:
    generated = judgement.generated_questions
    return [item.question, *(generated.questions if isinstance(generated, GeneratedQuestions) else [])]


def _summary(evidence: dict) -> str:
    if evidence.get("noncommittal"):
        return "the answer is noncommittal"
    return "questions the answer answers: " + " | ".join(str(q) for q in evidence.get("generated_questions", []))


METRIC = Metric(
    "answer_relevance",
    lambda s: answer_relevance(s.item, s.judgement, s.embedder),
    needs=(GENERATED_QUESTIONS,),
    embeds=_embeds,
    position=40,
    description="how closely the questions the answer answers match the question asked",
    summary=_summary,
)
