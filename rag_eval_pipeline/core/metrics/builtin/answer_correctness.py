"""answer_correctness AC = 0.75 * F1(TP, FP, FN of A's statements against G) + 0.25 * cos(e_A, e_G), the
Ragas library's metric with its default weights; an item whose G is a refusal (an unanswerable question)
scores 1 if A declines, else 0. The cosine is clipped at 0 so the score lies in [0, 1]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import CORRECTNESS, Failure, Judgement
from rag_eval_pipeline.core.judging.results import (
    NO_GROUND_TRUTH_TO_COMPARE,
    NO_STATEMENT_EITHER_SIDE,
    MetricResult,
    measured,
    unmeasured,
)
from rag_eval_pipeline.core.metrics.formulas import asked, clipped_cosines
from rag_eval_pipeline.core.metrics.metric import Metric
from rag_eval_pipeline.core.text import is_noncommittal

if TYPE_CHECKING:
    from rag_eval_pipeline.core.embeddings import Embedder

CORRECTNESS_WEIGHTS = (0.75, 0.25)  # statement F1, semantic similarity


def answer_correctness(item: EvalItem, judgement: Judgement, embedder: Embedder) -> MetricResult:
    result = asked(judgement.correctness, "the answer's correctness")
    if isinstance(result, Failure):
        return unmeasured("answer_correctness", result.reason)
    if not item.ground_truth.strip():
        return unmeasured("answer_correctness", NO_GROUND_TRUTH_TO_COMPARE)
    if is_noncommittal(item.ground_truth):
        # An unanswerable question: declining is the correct answer, anything else is not.
        return measured("answer_correctness", float(is_noncommittal(item.answer)), expected="a refusal")
    tp, fp, fn = len(result.true_positives), len(result.false_positives), len(result.false_negatives)
    if tp + fp + fn == 0:
        return unmeasured("answer_correctness", NO_STATEMENT_EITHER_SIDE)
    f1 = tp / (tp + 0.5 * (fp + fn))
    [similarity] = clipped_cosines(embedder, item.answer, [item.ground_truth])
    f1_weight, similarity_weight = CORRECTNESS_WEIGHTS
    return measured(
        "answer_correctness",
        f1_weight * f1 + similarity_weight * float(similarity),
        f1=round(f1, 4),
        similarity=round(float(similarity), 4),
        true_positives=result.true_positives,
        false_positives=result.false_positives,
        false_negatives=result.false_negatives,
    )


def _embeds(item: EvalItem, judgement: Judgement) -> list[str]:
    return [item.answer, item.ground_truth]


def _summary(evidence: dict) -> str:
    if "expected" in evidence:
        return f"expected {evidence['expected']}"
    wrong, missing = evidence.get("false_positives", []), evidence.get("false_negatives", [])
    parts = [f"not in the ground truth: {' | '.join(wrong)}"] if wrong else []
    parts += [f"missing: {' | '.join(missing)}"] if missing else []
    return "; ".join(parts) or "every statement agrees with the ground truth"


METRIC = Metric(
    "answer_correctness",
    lambda s: answer_correctness(s.item, s.judgement, s.embedder),
    needs=(CORRECTNESS,),
    embeds=_embeds,
    position=80,
    description="agreement of the answer's statements with the ground truth, and their similarity",
    summary=_summary,
)
