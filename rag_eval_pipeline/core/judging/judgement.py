"""What a judge says about one item, before any formula is applied.

A judge (offline or LLM) answers a few primitive questions per item; the metrics turn the answers
into scores by their formulas (core/metrics). Each answer is either a value or a `Failure` with the reason,
so a metric that could not be measured says why instead of scoring 0 or NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The primitive judgements a metric may need (core/metrics/registry.py). A criterion metric needs a
# Criterion instead (criteria.py), which the LLM judge scores.
ANSWER_STATEMENTS = "answer_statements"  # statements of A, each supported by C or not
GENERATED_QUESTIONS = "generated_questions"  # questions A answers, and whether A is noncommittal
GROUND_TRUTH_SUPPORT = "ground_truth_support"  # sentences of G, each supported by C or not
CHUNK_RELEVANCE = "chunk_relevance"  # each retrieved chunk, relevant to G or not
CONTEXT_RELEVANCE = "context_relevance"  # statements of C, each relevant to Q or not
CORRECTNESS = "correctness"  # statements of A and G sorted into TP / FP / FN
PRIMITIVES = (
    ANSWER_STATEMENTS,
    GENERATED_QUESTIONS,
    GROUND_TRUTH_SUPPORT,
    CHUNK_RELEVANCE,
    CONTEXT_RELEVANCE,
    CORRECTNESS,
)


@dataclass(frozen=True)
class Failure:
    """A judgement that could not be made, and why (truncated output, invalid JSON, count mismatch...)."""

    reason: str


@dataclass(frozen=True)
class Verdict:
    statement: str
    verdict: int  # 1 supported / relevant, 0 not
    note: str = ""

    def as_dict(self) -> dict:
        return {"statement": self.statement, "verdict": self.verdict, **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class GeneratedQuestions:
    questions: list[str]
    noncommittal: bool
    method: str = "questions generated from the answer"


@dataclass(frozen=True)
class Correctness:
    true_positives: list[str]  # statements of A that G supports
    false_positives: list[str]  # statements of A that G does not support
    false_negatives: list[str]  # statements of G missing from A


@dataclass(frozen=True)
class CriterionVerdict:
    """The LLM judge's grade of an item on one criterion: 1 (not met) to 5 (fully met), and what it found
    at each of the criterion's evaluation steps."""

    score: int
    findings: list[str]


@dataclass
class Judgement:
    """Primitive judgements for one item; None where not asked for."""

    answer_statements: list[Verdict] | Failure | None = None
    generated_questions: GeneratedQuestions | Failure | None = None
    ground_truth_support: list[Verdict] | Failure | None = None
    chunk_relevance: list[int] | Failure | None = None
    context_relevance: list[Verdict] | Failure | None = None
    correctness: Correctness | Failure | None = None
    criteria: dict[str, CriterionVerdict | Failure] = field(default_factory=dict)  # by the criterion's key
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # per call kind: calls, tokens, cache hits
    trace: tuple[str, str] = ("", "")  # (trace id, span id) of the item's span (core/tracing.py); "" when off


def add_usage(totals: dict[str, dict[str, int]], kind: str, counts: dict[str, int]) -> None:
    """Add one call's counts (calls, tokens, cache hits, retries) to the running totals of its kind."""
    bucket = totals.setdefault(kind, {})
    for name, value in counts.items():
        bucket[name] = bucket.get(name, 0) + value


def total_usage(judgements: list[Judgement]) -> dict[str, dict[str, int]]:
    """Calls, tokens and cache hits per call kind, summed over items."""
    totals: dict[str, dict[str, int]] = {}
    for judgement in judgements:
        for kind, counts in judgement.usage.items():
            add_usage(totals, kind, counts)
    return totals
