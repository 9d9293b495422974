"""The regression gate: paired means, coverage, tolerance, verdict, and the Markdown report."""

from __future__ import annotations

import math
from itertools import takewhile

import pandas as pd
import pytest

from rag_eval_pipeline.reporting.compare import BLOCK, NO_BASELINE, NOTHING_SCORED, PASS, UNMEASURED, compare
from rag_eval_pipeline.reporting.render import render_markdown


def scores(by_metric: dict[str, list[float | None]]) -> pd.DataFrame:
    """Score rows as metric_scores writes them: None means the item was unmeasured."""
    rows = []
    for metric, values in by_metric.items():
        for i, value in enumerate(values):
            rows.append(
                {
                    "qa_id": f"q{i}",
                    "metric": metric,
                    "score": value,
                    "status": "ok" if value is not None else "unmeasured",
                    "reason": "" if value is not None else "candidate failed: timed out",
                }
            )
    return pd.DataFrame(rows, columns=["qa_id", "metric", "score", "status", "reason"])


BASELINE = scores({"faithfulness": [1.0, 0.8, 0.6, 1.0, 0.6], "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0]})


def row(comparison, metric: str) -> dict:
    return comparison.table.set_index("metric").loc[metric].to_dict()


def test_a_drop_larger_than_the_tolerance_blocks_and_names_the_metric():
    # faithfulness mean 0.8 -> 0.72 (drop 0.08); hit_rate unchanged.
    candidate = scores({"faithfulness": [1.0, 0.8, 0.2, 1.0, 0.6], "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0]})

    comparison = compare(candidate, BASELINE)

    assert comparison.verdict == BLOCK
    assert comparison.failing_metrics == ["faithfulness"]
    faith = row(comparison, "faithfulness")
    assert faith["verdict"] == "regressed"
    assert faith["baseline_mean"] == pytest.approx(0.8)
    assert faith["candidate_mean"] == pytest.approx(0.72)
    assert faith["delta"] == pytest.approx(-0.08)
    assert row(comparison, "hit_rate")["verdict"] == "ok"


def test_a_drop_within_the_tolerance_passes():
    # faithfulness mean 0.8 -> 0.76 (drop 0.04 < 0.05).
    candidate = scores({"faithfulness": [1.0, 0.8, 0.4, 1.0, 0.6], "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0]})

    comparison = compare(candidate, BASELINE)

    assert comparison.verdict == PASS
    assert comparison.failing_metrics == []
    assert row(comparison, "faithfulness")["delta"] == pytest.approx(-0.04)


def test_a_drop_of_exactly_the_tolerance_passes():
    # "blocks when it drops by more than the tolerance": 0.8 -> 0.75 is allowed.
    candidate = scores({"faithfulness": [0.75] * 4, "hit_rate": [1.0] * 4})
    baseline = scores({"faithfulness": [0.8] * 4, "hit_rate": [1.0] * 4})

    assert compare(candidate, baseline).verdict == PASS


def test_an_improvement_passes_and_a_custom_tolerance_is_used():
    better = scores({"faithfulness": [1.0] * 5, "hit_rate": [1.0] * 5})
    worse = scores({"faithfulness": [1.0, 0.8, 0.2, 1.0, 0.6], "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0]})

    assert compare(better, BASELINE).verdict == PASS
    assert compare(worse, BASELINE, tolerance=0.1).verdict == PASS  # drop 0.08 allowed at 0.1
    assert compare(worse, BASELINE, tolerance=0.05).verdict == BLOCK


def test_a_coverage_drop_blocks_even_when_the_answered_items_score_the_same():
    baseline = scores({"hit_rate": [1.0] * 10})
    candidate = scores({"hit_rate": [1.0] * 7 + [None] * 3})  # fails on 3 more items

    comparison = compare(candidate, baseline)

    assert comparison.verdict == BLOCK
    assert comparison.failing_metrics == ["hit_rate"]
    hit = row(comparison, "hit_rate")
    assert hit["delta"] == 0.0
    assert (hit["coverage"], hit["baseline_coverage"]) == (0.7, 1.0)
    assert (hit["n_measured"], hit["n_unmeasured"], hit["n_items"]) == (7, 3, 10)


def test_a_coverage_drop_of_exactly_the_tolerance_passes():
    baseline = scores({"hit_rate": [1.0] * 20})
    candidate = scores({"hit_rate": [1.0] * 19 + [None]})

    comparison = compare(candidate, baseline)

    assert comparison.verdict == PASS, comparison.table.to_dict("records")


def test_without_a_baseline_the_verdict_is_no_baseline():
    candidate = scores({"faithfulness": [0.1, 0.2], "hit_rate": [0.0, None]})

    comparison = compare(candidate, None, min_coverage=0.5)

    assert comparison.verdict == NO_BASELINE
    assert comparison.failing_metrics == []
    assert set(comparison.table["verdict"]) == {"no baseline"}
    hit = row(comparison, "hit_rate")
    assert hit["candidate_mean"] == 0.0 and hit["coverage"] == 0.5
    assert hit["baseline_mean"] is None and hit["delta"] is None
    assert comparison.measured_enough


def test_without_a_baseline_a_metric_below_the_floor_is_unmeasured_and_not_promotable():
    candidate = scores({"faithfulness": [0.1, 0.2], "hit_rate": [0.0, None]})

    comparison = compare(candidate, None)  # the default floor, 80%

    assert comparison.verdict == UNMEASURED
    assert comparison.unmeasured_metrics == ["hit_rate"] and not comparison.measured_enough
    assert row(comparison, "hit_rate")["note"] == (
        "candidate measured on 1 of 2 items (50%, floor 80%): candidate failed: timed out (1 item)"
    )


def test_means_are_paired_over_items_measured_in_both_runs():
    # The baseline could not measure q3; the candidate scored 0.0 there. Unpaired, the candidate mean
    # would fall from 1.0 to 0.75; paired over q0-q2 there is no change.
    baseline = scores({"mrr": [1.0, 1.0, 1.0, None]})
    candidate = scores({"mrr": [1.0, 1.0, 1.0, 0.0]})

    comparison = compare(candidate, baseline, min_coverage=0.75)

    mrr = row(comparison, "mrr")
    assert mrr["paired_items"] == 3
    assert mrr["candidate_mean"] == 1.0 and mrr["baseline_mean"] == 1.0 and mrr["delta"] == 0.0
    assert comparison.verdict == PASS


def test_baseline_mean_is_over_the_paired_items_only():
    # The candidate failed on q0, where the baseline scored 0.0: the baseline mean over the pairs is 0.5,
    # not 0.375. Coverage drops by 0.25, which blocks on its own.
    baseline = scores({"mrr": [0.0, 0.5, 0.5, 0.5]})
    candidate = scores({"mrr": [None, 0.5, 0.5, 0.5]})

    mrr = row(compare(candidate, baseline), "mrr")

    assert mrr["paired_items"] == 3
    assert mrr["baseline_mean"] == 0.5 and mrr["candidate_mean"] == 0.5
    assert mrr["verdict"] == "regressed"


def test_numeric_means_have_no_nan_when_some_items_are_unmeasured():
    candidate = scores({"faithfulness": [1.0, None, 0.5, None], "hit_rate": [None, 1.0, 1.0, 0.0]})
    baseline = scores({"faithfulness": [None, 1.0, 0.5, 1.0], "hit_rate": [1.0, 1.0, None, 0.0]})

    for comparison in (compare(candidate, baseline), compare(candidate, None)):
        for column in ("candidate_mean", "baseline_mean", "delta", "coverage"):
            for value in comparison.table[column]:
                assert not (isinstance(value, float) and math.isnan(value)), (column, comparison.table)
    paired = compare(candidate, baseline)
    assert row(paired, "faithfulness")["candidate_mean"] == 0.5  # only q2 is measured in both
    assert row(paired, "hit_rate")["candidate_mean"] == pytest.approx(0.5)  # q1, q3


def test_no_nan_when_a_whole_metric_is_unmeasured():
    candidate = scores({"hit_rate": [1.0, 0.0], "faithfulness": [None, None]})

    comparison = compare(candidate, None)

    means = comparison.table["candidate_mean"].tolist()
    assert not any(isinstance(m, float) and math.isnan(m) for m in means), means


def test_a_metric_the_candidate_could_not_measure_at_all_regresses_against_a_measured_baseline():
    candidate = scores({"hit_rate": [1.0, 1.0], "faithfulness": [None, None]})
    baseline = scores({"hit_rate": [1.0, 1.0], "faithfulness": [0.9, 0.9]})

    comparison = compare(candidate, baseline)

    assert comparison.verdict == BLOCK
    assert comparison.failing_metrics == ["faithfulness"]


def test_a_metric_neither_run_could_measure_is_unmeasured_not_regressed_and_never_passes():
    candidate = scores({"hit_rate": [1.0, 1.0], "faithfulness": [None, None]})
    baseline = scores({"hit_rate": [1.0, 1.0], "faithfulness": [None, None]})

    comparison = compare(candidate, baseline)

    assert comparison.verdict == UNMEASURED
    assert row(comparison, "faithfulness")["verdict"] == "unmeasured"
    assert comparison.failing_metrics == []


def test_render_markdown_contains_the_verdict_and_every_metric():
    candidate = scores(
        {
            "faithfulness": [1.0, 0.8, 0.2, 1.0, 0.6],
            "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0],
            "mrr": [1.0, 0.5, None, 1.0, 1.0],
        }
    )
    baseline = scores(
        {
            "faithfulness": [1.0, 0.8, 0.6, 1.0, 0.6],
            "hit_rate": [1.0, 1.0, 0.0, 1.0, 1.0],
            "mrr": [1.0, 0.5, 0.5, 1.0, 1.0],
        }
    )
    comparison = compare(candidate, baseline)

    markdown = render_markdown(comparison, "Regression report: acme / v1", {"candidate commit": "abc123"})

    assert markdown.startswith("# Regression report: acme / v1\n")
    assert "**Verdict: BLOCK**" in markdown
    assert "- candidate commit: abc123" in markdown
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| metric |"))
    table_lines = list(takewhile(lambda line: line.startswith("| "), lines[start + 2 :]))
    assert sorted(line.split("|")[1].strip() for line in table_lines) == ["faithfulness", "hit_rate", "mrr"]
    faith_line = next(line for line in table_lines if line.startswith("| faithfulness "))
    assert "0.720" in faith_line and "0.800" in faith_line and "-0.080" in faith_line and "regressed" in faith_line
    assert "Regressed: faithfulness, mrr." in markdown  # mrr: coverage 100% -> 80%
    assert "nan" not in markdown.lower()


def test_render_markdown_without_baseline_shows_na():
    comparison = compare(scores({"hit_rate": [1.0, None]}), None, min_coverage=0.5)

    markdown = render_markdown(comparison, "Report", {})

    assert f"**Verdict: {NO_BASELINE.upper()}**" in markdown
    assert "| hit_rate | 1.000 | n/a | n/a | 1/2 | 50% | 0.05 | no baseline |" in markdown
    assert "Regressed:" not in markdown


def test_an_empty_score_table_is_unmeasured_instead_of_crashing():
    empty = pd.DataFrame(columns=["qa_id", "metric", "score", "status", "reason"])

    comparison = compare(empty, None)

    assert comparison.verdict == NOTHING_SCORED and comparison.verdict.startswith("unmeasured")
    assert comparison.table.empty and not comparison.measured_enough
    assert "UNMEASURED" in render_markdown(comparison, "empty", {})
