"""The result every metric returns: a score in [0, 1], or 'unmeasured' with the reason."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

OK = "ok"
UNMEASURED = "unmeasured"
# A score table's columns, one row per (item, metric), wherever it is kept. judge (with its prompt version)
# and k say how a score was made: only scores made alike are compared.
SCORE_COLUMNS = ["qa_id", "metric", "score", "status", "reason", "evidence", "judge", "k", "commit"]


@dataclass(frozen=True)
class MetricResult:
    metric: str
    score: float | None
    status: str
    reason: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status == OK:
            if self.score is None or math.isnan(self.score) or not 0.0 <= self.score <= 1.0:
                raise ValueError(f"{self.metric}: a measured score must be in [0, 1], got {self.score!r}")
        elif self.status == UNMEASURED:
            if self.score is not None or not self.reason:
                raise ValueError(f"{self.metric}: an unmeasured result has no score and must say why")
        else:
            raise ValueError(f"unknown status {self.status!r}")


def measured(metric: str, score: float, **evidence: Any) -> MetricResult:
    return MetricResult(metric, float(score), OK, "", evidence)


def unmeasured(metric: str, reason: str, **evidence: Any) -> MetricResult:
    return MetricResult(metric, None, UNMEASURED, reason, evidence)
