"""No pass without a measurement: coverage by cause, the floor, and what it does to the verdict.

Score rows carry the reasons the metrics and the judges really write (core/judging/results.py and the
LLM client's failure messages), so the classification by cause is exercised as the gate meets it.
"""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.results import (
    CANDIDATE,
    CANDIDATE_FAILED,
    EMPTY_ANSWER,
    JUDGE,
    NO_ANSWER_STATEMENT,
    NO_CONTEXT_STATEMENT,
    NO_GOLD_IDS,
    NOT_APPLICABLE,
    unmeasured_cause,
)
from rag_eval_pipeline.reporting.compare import BLOCK, NO_BASELINE, PASS, UNMEASURED, compare

INVALID_JSON = "reply is not valid JSON (Expecting value at character 0) (after one retry)"
TRUNCATED = "reply truncated at max_tokens=512 (after one retry)"


def rows(metric: str, cells: list[float | str]) -> pd.DataFrame:
    """One metric's score rows: a float is a measured score, a string the reason an item went unmeasured."""
    return pd.DataFrame(
        [
            {
                "qa_id": f"q{i}",
                "metric": metric,
                "score": cell if isinstance(cell, float) else None,
                "status": "ok" if isinstance(cell, float) else "unmeasured",
                "reason": "" if isinstance(cell, float) else cell,
            }
            for i, cell in enumerate(cells)
        ]
    )


def table(**metrics: list[float | str]) -> pd.DataFrame:
    return pd.concat([rows(metric, cells) for metric, cells in metrics.items()], ignore_index=True)


def verdicts(comparison) -> dict[str, str]:
    return dict(zip(comparison.table["metric"], comparison.table["verdict"]))


@pytest.mark.parametrize(
    "reason, cause",
    [
        (NO_GOLD_IDS, NOT_APPLICABLE),
        (NO_ANSWER_STATEMENT, NOT_APPLICABLE),
        (CANDIDATE_FAILED + "timed out after 30 s", CANDIDATE),
        (NO_CONTEXT_STATEMENT, NOT_APPLICABLE),
        (EMPTY_ANSWER, CANDIDATE),
        (INVALID_JSON, JUDGE),
        (TRUNCATED, JUDGE),
        ("3 verdicts for 2 reference sentences", JUDGE),
        ("the judge found no statement in a non-empty answer", JUDGE),
    ],
)
def test_each_reason_has_one_cause(reason, cause):
    assert unmeasured_cause(reason) == cause


def test_a_judge_that_fails_on_every_item_is_unmeasured_not_a_regression():
    """The issue's case: the LLM judge replies invalid JSON on every call; against a measured baseline that
    was a BLOCK (exit 1) blamed on the candidate. It is a failure to measure."""
    baseline = table(faithfulness=[1.0] * 10, hit_rate=[1.0] * 10)
    candidate = table(faithfulness=[INVALID_JSON] * 10, hit_rate=[1.0] * 10)

    comparison = compare(candidate, baseline)

    assert comparison.verdict == UNMEASURED
    assert verdicts(comparison) == {"faithfulness": "unmeasured", "hit_rate": "ok"}
    note = comparison.table.set_index("metric").at["faithfulness", "note"]
    assert note.startswith("candidate measured on 0 of 10 items (0%, floor 80%): reply is not valid JSON")
    assert "(10 items)" in note


def test_a_baseline_rescored_by_a_broken_judge_does_not_let_a_bad_candidate_pass():
    """The other half: the baseline re-scored with the broken judge has no coverage; every candidate
    passed against it, and was promoted on main. Now: unmeasured, and not promotable."""
    baseline = table(faithfulness=[INVALID_JSON] * 10, hit_rate=[1.0] * 10)
    candidate = table(faithfulness=[INVALID_JSON] * 10, hit_rate=[1.0] * 10)

    comparison = compare(candidate, baseline)

    assert comparison.verdict == UNMEASURED and comparison.unmeasured_metrics == ["faithfulness"]
    note = comparison.table.set_index("metric").at["faithfulness", "note"]
    assert "candidate measured on 0 of 10" in note and "baseline measured on 0 of 10" in note


def test_partial_judge_failures_below_the_floor_are_unmeasured_above_it_they_compare():
    baseline = table(context_recall=[1.0] * 10)
    below = table(context_recall=[1.0] * 7 + [TRUNCATED] * 3)  # 70% < 80%
    above = table(context_recall=[1.0] * 8 + [TRUNCATED] * 2)  # 80%: at the floor is enough

    assert compare(below, baseline).verdict == UNMEASURED
    assert compare(above, baseline).verdict == PASS  # judge failures are never a coverage regression
    assert compare(below, baseline, min_coverage=0.7).verdict == PASS


def test_a_measured_regression_blocks_even_when_another_metric_is_unmeasured():
    baseline = table(faithfulness=[1.0] * 10, hit_rate=[1.0] * 10)
    candidate = table(faithfulness=[INVALID_JSON] * 10, hit_rate=[0.0] * 10)

    comparison = compare(candidate, baseline)

    assert comparison.verdict == BLOCK and comparison.failing_metrics == ["hit_rate"]
    assert verdicts(comparison)["faithfulness"] == "unmeasured"


def test_a_candidate_that_fails_on_more_items_regresses_even_below_the_floor():
    """Failing is the candidate's doing: it is measured as a regression, not excused as unmeasured."""
    baseline = table(answer_correctness=[0.9] * 10)
    candidate = table(answer_correctness=[0.9] * 2 + [CANDIDATE_FAILED + "the candidate process ended"] * 8)

    comparison = compare(candidate, baseline)

    assert comparison.verdict == BLOCK and comparison.failing_metrics == ["answer_correctness"]
    assert (
        "the candidate gave nothing to measure on 8 of 10 items (the baseline on 0)" in comparison.table.at[0, "note"]
    )


def test_items_a_metric_does_not_apply_to_are_left_out_of_coverage():
    """Unanswerable items have no gold chunk, and a declining answer makes no claim: neither lowers coverage."""
    candidate = table(hit_rate=[1.0] * 7 + [NO_GOLD_IDS] * 3, faithfulness=[1.0] * 6 + [NO_ANSWER_STATEMENT] * 4)

    comparison = compare(candidate, None)

    assert comparison.verdict == NO_BASELINE and comparison.measured_enough
    by_metric = comparison.table.set_index("metric")
    assert (by_metric.at["hit_rate", "coverage"], by_metric.at["hit_rate", "n_applicable"]) == (1.0, 7)
    assert (by_metric.at["faithfulness", "coverage"], by_metric.at["faithfulness", "n_applicable"]) == (1.0, 6)


def test_a_metric_that_applies_to_no_item_does_not_gate():
    candidate = table(hit_rate=[NO_GOLD_IDS] * 4, answer_correctness=[0.5] * 4)

    comparison = compare(candidate, candidate)

    assert verdicts(comparison) == {"hit_rate": "not applicable", "answer_correctness": "ok"}
    assert comparison.verdict == PASS


def test_a_candidate_that_fails_on_every_item_cannot_become_a_baseline():
    """Without a baseline there is nothing to regress from; what the candidate gave nothing to measure on
    counts against its coverage, so a first gate cannot make it the baseline."""
    failed = CANDIDATE_FAILED + "the candidate process ended (exit code 0) without answering"
    candidate = table(faithfulness=[failed] * 5, answer_correctness=[failed] * 4 + [1.0])

    comparison = compare(candidate, None)

    assert comparison.verdict == UNMEASURED and not comparison.measured_enough
    assert set(verdicts(comparison).values()) == {"unmeasured"}


def test_declining_and_retrieving_nothing_is_measured_where_it_counts():
    """'I do not know.' with no contexts: faithfulness and contextual relevancy do not apply (nothing to
    verify or judge), correctness and hit rate measure it, and against a baseline it blocks."""
    declines = table(
        faithfulness=[NO_ANSWER_STATEMENT] * 5,
        contextual_relevancy=[NO_CONTEXT_STATEMENT] * 5,
        answer_correctness=[0.0] * 4 + [1.0],
        hit_rate=[0.0] * 5,
    )
    reference = table(
        faithfulness=[1.0] * 5, contextual_relevancy=[0.6] * 5, answer_correctness=[0.8] * 5, hit_rate=[1.0] * 5
    )

    alone, against = compare(declines, None), compare(declines, reference)

    assert verdicts(alone)["faithfulness"] == verdicts(alone)["contextual_relevancy"] == "not applicable"
    assert against.verdict == BLOCK and set(against.failing_metrics) == {"answer_correctness", "hit_rate"}


def test_nothing_measured_anywhere_never_passes():
    candidate = table(hit_rate=[NO_GOLD_IDS] * 3)

    assert compare(candidate, candidate).verdict.startswith("unmeasured")
    assert compare(candidate, None).verdict.startswith("unmeasured")
