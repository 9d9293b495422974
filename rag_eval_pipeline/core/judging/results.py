"""The result every metric returns: a score in [0, 1], or 'unmeasured' with the reason."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

OK = "ok"
UNMEASURED = "unmeasured"
# A score table's columns, one row per (item, metric), wherever it is kept. judge (with its prompt version)
# and k say how a score was made: only scores made alike are compared. trace_id and span_id: the judge's span
# of the item (core/tracing.py), "" when tracing was off.
SCORE_COLUMNS = [
    "qa_id",
    "metric",
    "score",
    "status",
    "reason",
    "evidence",
    "judge",
    "k",
    "commit",
    "trace_id",
    "span_id",
]


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


# Why a metric could not be measured on an item, by whose doing. The gate reads it (reporting/compare.py):
# - NOT_APPLICABLE: the metric does not apply: the golden item has no gold chunk or no ground truth, a
#   declining (or empty) answer makes no claim to verify, or no context was retrieved to judge (retrieving
#   nothing is measured where it counts: hit rate, MRR, context recall and precision; and for an
#   unanswerable question it may be right). Left out of coverage, on both sides.
# - CANDIDATE: the candidate gave nothing to measure: it failed on the item or answered nothing. Counted
#   against the candidate: more of these than the baseline had is a regression.
# - JUDGE: the judge could not measure it (an invalid or truncated reply after a retry, verdicts that do not
#   match the statements). A failure to measure, never a regression: below the coverage floor the gate
#   cannot decide.
NOT_APPLICABLE, CANDIDATE, JUDGE = "not applicable", "candidate", "judge"
NO_GOLD_IDS = "item has no gold chunk ids"
NO_GROUND_TRUTH_TO_RECALL = "no ground-truth answer to recall"
NO_GROUND_TRUTH_FOR_RELEVANCE = "no ground-truth answer to judge chunk relevance against"
NO_GROUND_TRUTH_TO_COMPARE = "no ground-truth answer to compare with"
NO_ANSWER_STATEMENT = "the answer makes no statement to verify"
NO_STATEMENT_EITHER_SIDE = "neither the answer nor the ground truth makes a statement"
NO_CONTEXT_STATEMENT = "the retrieved contexts make no statement"
EMPTY_ANSWER = "empty answer"
# The offline judge declines what its signals are blind to (judge.py, Abstention; measured by
# benchmarks/judge_abstention.py). Not in the sets below, so the cause is JUDGE: it counts against coverage
# like any judge failure, never as a pass nor as the candidate's fault. One text per kind, without the item's
# own figures, so the report counts the items behind each reason.
OFFLINE_JUDGE_ABSTAINS = "offline judge abstains: "
ABSTAINS_LONG_ANSWER = (
    OFFLINE_JUDGE_ABSTAINS + "the answer is longer than {words} words, more than it can judge (its faithfulness "
    "agreement with human labels on long answers is near chance, use the LLM judge)"
)
ABSTAINS_PARAPHRASE = (
    OFFLINE_JUDGE_ABSTAINS + "the answer is worded unlike the contexts (under {share:.0%} of its content words "
    "are in them) and no number, name or negation in it is wrong, so it cannot tell a paraphrase from a "
    "hallucination (use the LLM judge)"
)
ABSTAINS_NOT_ENGLISH = (
    OFFLINE_JUDGE_ABSTAINS + "the {field} is not English, and its word signals and embedding model are "
    "English-only (use the LLM judge)"
)
CANDIDATE_FAILED = "candidate failed: "  # + the candidate's error
NOT_APPLICABLE_PREFIX = "not applicable: "  # + why a team's metric does not apply (evaluation/user_metrics.py)

_NOT_APPLICABLE_REASONS = frozenset(
    {
        NO_GOLD_IDS,
        NO_GROUND_TRUTH_TO_RECALL,
        NO_GROUND_TRUTH_FOR_RELEVANCE,
        NO_GROUND_TRUTH_TO_COMPARE,
        NO_ANSWER_STATEMENT,
        NO_STATEMENT_EITHER_SIDE,
        NO_CONTEXT_STATEMENT,
    }
)
_CANDIDATE_REASONS = frozenset({EMPTY_ANSWER})


def unmeasured_cause(reason: str) -> str:
    """NOT_APPLICABLE, CANDIDATE or JUDGE for an unmeasured row's reason (also for rows stored before this
    classification existed: the reasons are the same words)."""
    if reason in _NOT_APPLICABLE_REASONS or reason.startswith(NOT_APPLICABLE_PREFIX):
        return NOT_APPLICABLE
    if reason in _CANDIDATE_REASONS or reason.startswith(CANDIDATE_FAILED):
        return CANDIDATE
    return JUDGE


def is_abstention(reason: str) -> bool:
    """The offline judge declined the item (a JUDGE cause, see above)."""
    return reason.startswith(OFFLINE_JUDGE_ABSTAINS)


def measured(metric: str, score: float, **evidence: Any) -> MetricResult:
    return MetricResult(metric, float(score), OK, "", evidence)


def unmeasured(metric: str, reason: str, **evidence: Any) -> MetricResult:
    return MetricResult(metric, None, UNMEASURED, reason, evidence)
