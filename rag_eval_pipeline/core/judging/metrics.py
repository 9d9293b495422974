"""The metrics, as pure functions of one item and the judge's judgement.

Formulas. Faithfulness and answer relevance follow Es et al., "RAGAS: Automated Evaluation of Retrieval
Augmented Generation" (EACL 2024 demo track, arXiv:2309.15217); context recall, context precision and
answer correctness (with its default weights) follow the Ragas library's metric documentation;
contextual relevancy follows DeepEval's metric of that name; hit rate@k and MRR are the standard
information-retrieval measures. Q: the question, A: the answer, C: the retrieved contexts, G: the
ground truth.

  faithfulness          F  = supported statements of A / statements of A
  answer_relevance      AR = mean_i cos(e_Q, e_q'_i) over questions q'_i generated from A; 0 if A is noncommittal
  context_recall        CR = sentences of G supported by C / sentences of G
  context_precision     CP = sum_k P@k * I(k) / sum_k I(k), I(k) = chunk k relevant to G; 0 if none is
  contextual_relevancy  CRel = statements of C relevant to Q / statements of C
  answer_correctness    AC = 0.75 * F1(TP, FP, FN of A's statements against G) + 0.25 * cos(e_A, e_G)
                        (an item whose G is a refusal, e.g. an unanswerable question: 1 if A declines, else 0)
  hit_rate@k, mrr       from the gold chunk ids, no judge
Cosines are clipped at 0 so every score lies in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from rag_eval_pipeline.core.defaults import ALL_METRICS
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judgement import Failure, GeneratedQuestions, Judgement, Verdict, needed_judgements
from rag_eval_pipeline.core.judging.results import (
    EMPTY_ANSWER,
    NO_ANSWER_STATEMENT,
    NO_CONTEXT_STATEMENT,
    NO_GOLD_IDS,
    NO_GROUND_TRUTH_TO_COMPARE,
    NO_GROUND_TRUTH_TO_RECALL,
    NO_STATEMENT_EITHER_SIDE,
    MetricResult,
    measured,
    unmeasured,
)
from rag_eval_pipeline.core.text import is_noncommittal

T = TypeVar("T")
CORRECTNESS_WEIGHTS = (0.75, 0.25)  # statement F1, semantic similarity


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
        return unmeasured("hit_rate", NO_GOLD_IDS)
    top = [c["id"] for c in item.contexts[:k]]
    hit = bool(set(item.gold_chunk_ids) & set(top))
    return measured("hit_rate", 1.0 if hit else 0.0, k=k, retrieved=top, gold=list(item.gold_chunk_ids))


def mrr(item: EvalItem, k: int) -> MetricResult:
    if not item.gold_chunk_ids:
        return unmeasured("mrr", NO_GOLD_IDS)
    gold = set(item.gold_chunk_ids)
    rank = next((i + 1 for i, c in enumerate(item.contexts[:k]) if c["id"] in gold), None)
    return measured("mrr", 1.0 / rank if rank else 0.0, k=k, first_relevant_rank=rank)


def _asked(value: T | None, what: str) -> T:
    """A judgement the metric needs: the judge fills what needed_judgements() names, so None is a bug."""
    if value is None:
        raise ValueError(f"the judge was not asked for {what}")
    return value


def faithfulness(judgement: Judgement) -> MetricResult:
    verdicts = _asked(judgement.answer_statements, "the answer's statements")
    return _supported_share("faithfulness", verdicts, NO_ANSWER_STATEMENT, "statements")


def context_recall(judgement: Judgement) -> MetricResult:
    verdicts = _asked(judgement.ground_truth_support, "the ground truth's support")
    return _supported_share("context_recall", verdicts, NO_GROUND_TRUTH_TO_RECALL, "ground_truth")


def contextual_relevancy(judgement: Judgement) -> MetricResult:
    verdicts = _asked(judgement.context_relevance, "the contexts' relevance")
    return _supported_share("contextual_relevancy", verdicts, NO_CONTEXT_STATEMENT, "context_statements")


def answer_relevance(item: EvalItem, judgement: Judgement, embedder: Embedder) -> MetricResult:
    generated = _asked(judgement.generated_questions, "questions generated from the answer")
    if isinstance(generated, Failure):
        return unmeasured("answer_relevance", generated.reason)
    if not item.answer.strip():
        return unmeasured("answer_relevance", EMPTY_ANSWER)
    if generated.noncommittal:
        return measured("answer_relevance", 0.0, noncommittal=True, method=generated.method)
    if not generated.questions:
        return unmeasured("answer_relevance", "no question could be generated from the answer")
    vectors = embedder.embed([item.question, *generated.questions])
    cosines = np.clip(vectors[1:] @ vectors[0], 0.0, 1.0)
    return measured(
        "answer_relevance",
        float(cosines.mean()),
        generated_questions=generated.questions,
        cosines=[round(float(c), 4) for c in cosines],
        method=generated.method,
    )


def context_precision(judgement: Judgement) -> MetricResult:
    relevance = _asked(judgement.chunk_relevance, "the chunks' relevance")
    if isinstance(relevance, Failure):
        return unmeasured("context_precision", relevance.reason)
    return measured("context_precision", average_precision(relevance), relevance=list(relevance))


def answer_correctness(item: EvalItem, judgement: Judgement, embedder: Embedder) -> MetricResult:
    result = _asked(judgement.correctness, "the answer's correctness")
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
    answer_vector, truth_vector = embedder.embed([item.answer, item.ground_truth])
    similarity = float(np.clip(answer_vector @ truth_vector, 0.0, 1.0))
    f1_weight, similarity_weight = CORRECTNESS_WEIGHTS
    return measured(
        "answer_correctness",
        f1_weight * f1 + similarity_weight * similarity,
        f1=round(f1, 4),
        similarity=round(similarity, 4),
        true_positives=result.true_positives,
        false_positives=result.false_positives,
        false_negatives=result.false_negatives,
    )


def average_precision(relevant: list[int]) -> float:
    """Rank-aware precision of the relevant chunks; 0 when none is relevant."""
    hits, total = 0, 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def _supported_share(
    metric: str, verdicts: list[Verdict] | Failure, empty_reason: str, evidence_key: str
) -> MetricResult:
    """Share of statements judged supported (or relevant), with every verdict as evidence."""
    if isinstance(verdicts, Failure):
        return unmeasured(metric, verdicts.reason)
    if not verdicts:
        return unmeasured(metric, empty_reason)
    supported = sum(v.verdict for v in verdicts)
    return measured(metric, supported / len(verdicts), **{evidence_key: [v.as_dict() for v in verdicts]})


def score_judged(item: EvalItem, judgement: Judgement, embedder: Embedder, k: int, metrics) -> list[MetricResult]:
    """Every requested metric for one item from its judgement (which must hold what they need)."""
    scorers = {
        "hit_rate": lambda: hit_rate(item, k),
        "mrr": lambda: mrr(item, k),
        "faithfulness": lambda: faithfulness(judgement),
        "answer_relevance": lambda: answer_relevance(item, judgement, embedder),
        "context_recall": lambda: context_recall(judgement),
        "context_precision": lambda: context_precision(judgement),
        "contextual_relevancy": lambda: contextual_relevancy(judgement),
        "answer_correctness": lambda: answer_correctness(item, judgement, embedder),
    }
    return [scorers[name]() for name in metrics]


def _embed_in_one_batch(items: list[EvalItem], judgements: list[Judgement], embedder: Embedder, metrics) -> None:
    """Embed every text the formulas will need in one batched call; each item then reads the cache."""
    texts: list[str] = []
    if "answer_relevance" in metrics:
        texts += [item.question for item in items]
        texts += [
            q
            for j in judgements
            if isinstance(j.generated_questions, GeneratedQuestions)
            for q in j.generated_questions.questions
        ]
    if "answer_correctness" in metrics:
        texts += [t for item in items for t in (item.answer, item.ground_truth)]
    if texts:
        embedder.embed(list(dict.fromkeys(texts)))


def score_items(items: list[EvalItem], judge, embedder: Embedder, metrics=ALL_METRICS, k: int = 5):
    """(results per item, judgements): one batch of judge calls for all items, then the formulas."""
    needs = needed_judgements(metrics)
    judgements = judge.judge_many(items, needs) if needs else [Judgement() for _ in items]
    _embed_in_one_batch(items, judgements, embedder, metrics)
    return [score_judged(item, j, embedder, k, metrics) for item, j in zip(items, judgements)], judgements
