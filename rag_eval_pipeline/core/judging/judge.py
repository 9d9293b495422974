"""The judge interface and the embedded offline judge.

The offline judge needs no server: statement support comes from model-free signals (numbers,
names, negation, relations that must agree with the context; see offline_support.py), answer
relevance and context relevance are embedding cosines. It is a weak judge and is reported as such;
the LLM judge implements the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judgement import (
    ANSWER_STATEMENTS,
    CHUNK_RELEVANCE,
    CONTEXT_RELEVANCE,
    CORRECTNESS,
    GENERATED_QUESTIONS,
    GROUND_TRUTH_SUPPORT,
    Correctness,
    Failure,
    GeneratedQuestions,
    Judgement,
    Verdict,
)
from rag_eval_pipeline.core.judging.metrics import EvalItem
from rag_eval_pipeline.core.judging.offline_support import assess_support
from rag_eval_pipeline.core.judging.results import NO_GROUND_TRUTH_FOR_RELEVANCE
from rag_eval_pipeline.core.text import content_words, is_noncommittal, split_sentences


@dataclass(frozen=True)
class Support:
    """Whether one statement is backed by the contexts, and the evidence for the verdict."""

    statement: str
    supported: bool
    score: float  # graded confidence of support, >= 0.5 exactly when supported
    context_index: int | None
    note: str = ""


class Judge(Protocol):
    """Answers the primitive judgements (see judgement.py) the requested metrics need."""

    name: str

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]: ...


class OfflineJudge:
    """Model-free support signals plus embedding similarity; deterministic, free, and weak (see the README)."""

    name = "offline-support-v2"
    relevance_threshold = 0.4  # cosine(question, context sentence) above which the sentence is on topic

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        if CONTEXT_RELEVANCE in needs:  # one batched embedding call instead of one per item
            sentences = [s for item in items for text in item.context_texts for s in self.statements(text)]
            self.embedder.embed(list(dict.fromkeys([item.question for item in items] + sentences)))
        return [self.judge(item, needs) for item in items]

    def judge(self, item: EvalItem, needs: set[str]) -> Judgement:
        judgement = Judgement()
        answer_statements = self.statements(item.answer)
        truth_sentences = self.statements(item.ground_truth)
        if ANSWER_STATEMENTS in needs:
            judgement.answer_statements = self._verdicts(answer_statements, item.context_texts, item.question)
        if GENERATED_QUESTIONS in needs:
            # No generator offline: the answer itself stands in for the questions it answers.
            judgement.generated_questions = GeneratedQuestions(
                [item.answer], is_noncommittal(item.answer), "offline: cosine(question, answer), no question generation"
            )
        if GROUND_TRUTH_SUPPORT in needs:
            judgement.ground_truth_support = self._verdicts(truth_sentences, item.context_texts, item.question)
        if CHUNK_RELEVANCE in needs:
            judgement.chunk_relevance = (
                [
                    int(any(v.supported for v in self.verify(truth_sentences, [text], item.question)))
                    for text in item.context_texts
                ]
                if truth_sentences
                else Failure(NO_GROUND_TRUTH_FOR_RELEVANCE)
            )
        if CONTEXT_RELEVANCE in needs:
            judgement.context_relevance = self._relevant_to(item.question, item.context_texts)
        if CORRECTNESS in needs:
            against_truth = self.verify(answer_statements, [item.ground_truth], item.question)
            judgement.correctness = Correctness(
                true_positives=[v.statement for v in against_truth if v.supported],
                false_positives=[v.statement for v in against_truth if not v.supported],
                false_negatives=[
                    v.statement for v in self.verify(truth_sentences, [item.answer], item.question) if not v.supported
                ],
            )
        return judgement

    def _verdicts(self, statements: list[str], contexts: list[str], question: str) -> list[Verdict]:
        return [Verdict(s.statement, int(s.supported), s.note) for s in self.verify(statements, contexts, question)]

    def _relevant_to(self, question: str, contexts: list[str]) -> list[Verdict]:
        sentences = [s for text in contexts for s in self.statements(text)]
        if not sentences:
            return []
        vectors = self.embedder.embed([question, *sentences])
        cosines = vectors[1:] @ vectors[0]
        return [Verdict(s, int(c >= self.relevance_threshold), f"cosine {c:.2f}") for s, c in zip(sentences, cosines)]

    def statements(self, text: str) -> list[str]:
        """Sentences that assert something: 'I don't know.' is not a claim to verify."""
        return [s for s in split_sentences(text) if content_words(s) and not is_noncommittal(s)]

    def verify(self, statements: list[str], contexts: list[str], question: str = "") -> list[Support]:
        """One verdict per statement from the model-free support signals (see offline_support.py)."""
        verdicts = []
        for statement in statements:
            found = assess_support(statement, contexts, question)
            verdicts.append(Support(statement, found.supported, found.score, found.context_index, found.note))
        return verdicts
