"""Pieces the built-in formulas share: the judgement a metric asked for, the share of supported
statements, rank-aware precision and clipped cosines."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from rag_eval_pipeline.core.judging.judgement import Failure, Verdict
from rag_eval_pipeline.core.judging.results import MetricResult, measured, unmeasured

if TYPE_CHECKING:
    import numpy as np

    from rag_eval_pipeline.core.embeddings import Embedder

T = TypeVar("T")


def asked(value: T | None, what: str) -> T:
    """A judgement the metric needs: the judge fills what the metric's needs name, so None is a bug."""
    if value is None:
        raise ValueError(f"the judge was not asked for {what}")
    return value


def supported_share(
    metric: str, verdicts: list[Verdict] | Failure, empty_reason: str, evidence_key: str
) -> MetricResult:
    """Share of statements judged supported (or relevant), with every verdict as evidence."""
    if isinstance(verdicts, Failure):
        return unmeasured(metric, verdicts.reason)
    if not verdicts:
        return unmeasured(metric, empty_reason)
    supported = sum(v.verdict for v in verdicts)
    return measured(metric, supported / len(verdicts), **{evidence_key: [v.as_dict() for v in verdicts]})


def average_precision(relevant: list[int]) -> float:
    """Rank-aware precision of the relevant chunks; 0 when none is relevant."""
    hits, total = 0, 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def clipped_cosines(embedder: Embedder, anchor: str, others: list[str]) -> np.ndarray:
    """cos(anchor, each other text), clipped at 0 so that a score stays in [0, 1]."""
    import numpy as np

    vectors = embedder.embed([anchor, *others])
    return np.clip(vectors[1:] @ vectors[0], 0.0, 1.0)


def failing_statements(verdicts: list, none_text: str, some_text: str) -> str:
    """An evidence line: the statements judged 0, or that none was ({n}: how many were judged)."""
    failing = [str(v.get("statement", "")) for v in verdicts if isinstance(v, dict) and not v.get("verdict")]
    return f"{some_text}: " + " | ".join(failing) if failing else none_text.format(n=len(verdicts))
