"""The judge interface and the embedded offline judge.

The offline judge needs no server: statement support is lexical (content-word coverage, with
numbers and negation that must agree), answer relevance and context relevance are embedding
cosines. It is a weak judge and is reported as such; the LLM judge implements the same interface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rag_eval_pipeline.embeddings import Embedder
from rag_eval_pipeline.evaluation.judgement import (
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
from rag_eval_pipeline.evaluation.metrics import EvalItem
from rag_eval_pipeline.text import content_words, numbers, split_sentences

_NEGATION = re.compile(r"\b(not|no|never|none|cannot|can't|won't|isn't|aren't|doesn't|don't|didn't|without)\b", re.I)
_NONCOMMITTAL = re.compile(
    r"\b(i (do not|don't) know|cannot (be )?answer|can't answer|not (\w+ ){0,2}enough information|no information"
    r"|unable to (answer|find|determine)|not (mentioned|stated|specified) in the)\b",
    re.I,
)


@dataclass(frozen=True)
class Support:
    """Whether one statement is backed by the contexts, and the evidence for the verdict."""

    statement: str
    supported: bool
    coverage: float
    context_index: int | None
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "statement": self.statement,
            "verdict": int(self.supported),
            "coverage": round(self.coverage, 3),
            "context_index": self.context_index,
            "note": self.note,
        }


class Judge(Protocol):
    """Answers the primitive judgements (see judgement.py) the requested metrics need."""

    name: str

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]: ...


class OfflineJudge:
    """Lexical support plus embedding similarity; deterministic, free, and weak (see the README)."""

    name = "offline-lexical-v1"
    relevance_threshold = 0.4  # cosine(question, context sentence) above which the sentence is on topic

    def __init__(self, embedder: Embedder, coverage_threshold: float = 0.75):
        self.embedder = embedder
        self.coverage_threshold = coverage_threshold

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        return [self.judge(item, needs) for item in items]

    def judge(self, item: EvalItem, needs: set[str]) -> Judgement:
        judgement = Judgement()
        answer_statements = self.statements(item.answer)
        truth_sentences = self.statements(item.ground_truth)
        if ANSWER_STATEMENTS in needs:
            judgement.answer_statements = self._verdicts(answer_statements, item.context_texts)
        if GENERATED_QUESTIONS in needs:
            # No generator offline: the answer itself stands in for the questions it answers.
            judgement.generated_questions = GeneratedQuestions(
                [item.answer], _is_noncommittal(item.answer), "offline: cosine(question, answer), no question generation"
            )
        if GROUND_TRUTH_SUPPORT in needs:
            judgement.ground_truth_support = self._verdicts(truth_sentences, item.context_texts)
        if CHUNK_RELEVANCE in needs:
            judgement.chunk_relevance = (
                [int(any(v.supported for v in self.verify(truth_sentences, [text]))) for text in item.context_texts]
                if truth_sentences else Failure("no ground-truth answer to judge chunk relevance against")
            )
        if CONTEXT_RELEVANCE in needs:
            judgement.context_relevance = self._relevant_to(item.question, item.context_texts)
        if CORRECTNESS in needs:
            against_truth = self.verify(answer_statements, [item.ground_truth])
            judgement.correctness = Correctness(
                true_positives=[v.statement for v in against_truth if v.supported],
                false_positives=[v.statement for v in against_truth if not v.supported],
                false_negatives=[v.statement for v in self.verify(truth_sentences, [item.answer]) if not v.supported],
            )
        return judgement

    def _verdicts(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        return [Verdict(s.statement, int(s.supported), s.note) for s in self.verify(statements, contexts)]

    def _relevant_to(self, question: str, contexts: list[str]) -> list[Verdict]:
        sentences = [s for text in contexts for s in self.statements(text)]
        if not sentences:
            return []
        vectors = self.embedder.embed([question, *sentences])
        cosines = vectors[1:] @ vectors[0]
        return [
            Verdict(s, int(c >= self.relevance_threshold), f"cosine {c:.2f}") for s, c in zip(sentences, cosines)
        ]

    def statements(self, text: str) -> list[str]:
        """Sentences that assert something: 'I don't know.' is not a claim to verify."""
        return [s for s in split_sentences(text) if content_words(s) and not _is_noncommittal(s)]

    def verify(self, statements: list[str], contexts: list[str]) -> list[Support]:
        context_words = [set(content_words(c)) for c in contexts]
        context_numbers = set().union(*(numbers(c) for c in contexts)) if contexts else set()
        return [self._verify_one(s, contexts, context_words, context_numbers) for s in statements]

    def _verify_one(self, statement, contexts, context_words, context_numbers) -> Support:
        words = set(content_words(statement))
        if not contexts:
            return Support(statement, False, 0.0, None, "no context")
        coverages = [len(words & cw) / len(words) if words else 0.0 for cw in context_words]
        best = int(np.argmax(coverages))
        coverage = coverages[best]
        missing_numbers = numbers(statement) - context_numbers
        if missing_numbers:
            return Support(statement, False, coverage, best, f"numbers not in context: {sorted(missing_numbers)}")
        if coverage >= self.coverage_threshold and _negation_differs(statement, contexts[best]):
            return Support(statement, False, coverage, best, "negation differs from the context")
        return Support(statement, coverage >= self.coverage_threshold, coverage, best)


def _is_noncommittal(text: str) -> bool:
    return bool(_NONCOMMITTAL.search(text.replace("\u2019", "'")))  # models often write a typographic apostrophe


def _negation_differs(statement: str, context: str) -> bool:
    """Negated in the statement but not in the sentence of the context that matches it best, or the reverse."""
    words = set(content_words(statement))
    sentences = split_sentences(context) or [context]
    best = max(sentences, key=lambda s: len(words & set(content_words(s))))
    return bool(_NEGATION.search(statement)) != bool(_NEGATION.search(best))
