"""What a metric is: a `Metric`, declared once (core/metrics/registry.py collects them), and the `Scoring`
its formula reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rag_eval_pipeline.core.judging.criteria import Criterion
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Judgement
from rag_eval_pipeline.core.judging.results import MetricResult

if TYPE_CHECKING:
    from rag_eval_pipeline.core.embeddings import Embedder

Need = str | Criterion  # a primitive judgement's name, or a criterion the LLM judge scores


@dataclass(frozen=True)
class Scoring:
    """What a formula reads: one item, the judge's judgement of it (holding what the metric needs), the
    embedder (its texts are cached by then) and k, the retrieval cut-off."""

    item: EvalItem
    judgement: Judgement
    embedder: Embedder
    k: int


@dataclass(frozen=True)
class Metric:
    name: str
    formula: Callable[[Scoring], MetricResult]
    needs: tuple[Need, ...] = ()
    embeds: Callable[[EvalItem, Judgement], list[str]] | None = None  # the texts its formula embeds
    tolerance: float | None = None  # the largest allowed drop of its mean; None: the gate's --tolerance
    description: str = ""
    position: int = 1000  # order among the built-ins (retrieval first); a team's metrics come after them
    identity: str = ""  # a team's metric: its version (a hash of its code or criterion); "" for a built-in
    summary: Callable[[dict], str] | None = None  # its evidence in one line, for a person

    @property
    def judged(self) -> bool:
        """Scored from what the judge says (calibration and PPI apply), not from ids alone."""
        return bool(self.needs)

    @property
    def criteria(self) -> tuple[Criterion, ...]:
        return tuple(need for need in self.needs if isinstance(need, Criterion))

    def score(self, scoring: Scoring) -> MetricResult:
        result = self.formula(scoring)
        return result if result.metric == self.name else replace(result, metric=self.name)

    def evidence_line(self, evidence: dict) -> str:
        return self.summary(evidence) if self.summary else ""
