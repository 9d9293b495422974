"""The judge interface and the embedded offline judge.

The offline judge needs no server: statement support is lexical (content-word coverage, with
numbers and negation that must agree) and answer relevance is an embedding cosine. It is a weak
judge and is reported as such; an LLM judge implements the same interface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rag_eval_pipeline.embeddings import Embedder
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
    """What every judge answers. The metrics combine these verdicts by the design's formulas."""

    name: str

    def statements(self, text: str) -> list[str]: ...

    def verify(self, statements: list[str], contexts: list[str]) -> list[Support]: ...

    def relevance_to_question(self, question: str, answer: str) -> tuple[float, dict]: ...


class OfflineJudge:
    """Lexical support plus embedding similarity; deterministic and free."""

    name = "offline-lexical-v1"

    def __init__(self, embedder: Embedder, coverage_threshold: float = 0.75):
        self.embedder = embedder
        self.coverage_threshold = coverage_threshold

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

    def relevance_to_question(self, question: str, answer: str) -> tuple[float, dict]:
        if _is_noncommittal(answer):
            return 0.0, {"noncommittal": True}
        q, a = self.embedder.embed([question, answer])
        return max(0.0, float(q @ a)), {"method": "cosine(question, answer) with all-MiniLM-L6-v2"}


def _is_noncommittal(text: str) -> bool:
    return bool(_NONCOMMITTAL.search(text.replace("\u2019", "'")))  # models often write a typographic apostrophe


def _negation_differs(statement: str, context: str) -> bool:
    """Negated in the statement but not in the sentence of the context that matches it best, or the reverse."""
    words = set(content_words(statement))
    sentences = split_sentences(context) or [context]
    best = max(sentences, key=lambda s: len(words & set(content_words(s))))
    return bool(_NEGATION.search(statement)) != bool(_NEGATION.search(best))
