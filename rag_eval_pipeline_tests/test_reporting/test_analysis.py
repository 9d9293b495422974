"""Where and why: bootstrap intervals, per-metric tolerance, per-type deltas, quadrants, worst items, HTML."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from rag_eval_pipeline.reporting.compare import (
    BLOCK,
    PASS,
    analyse,
    bootstrap_interval,
    breakdown_by_type,
    compare,
    item_stages,
    quadrant_counts,
    stage_summary,
    stage_transitions,
    worst_items,
)
from rag_eval_pipeline.reporting.render import render_html, render_markdown


def frame(by_item: dict[str, dict[str, float | None]], evidence: str = "{}") -> pd.DataFrame:
    """{qa_id: {metric: score or None}} -> metric_scores rows (None: unmeasured)."""
    rows = [
        {
            "qa_id": qa_id,
            "metric": metric,
            "score": score,
            "status": "ok" if score is not None else "unmeasured",
            "reason": "" if score is not None else "judge failed",
            "evidence": evidence,
            "judge": "j",
            "commit": "c",
        }
        for qa_id, metrics in by_item.items()
        for metric, score in metrics.items()
    ]
    return pd.DataFrame(rows)


def one_metric(metric: str, values: list[float | None]) -> pd.DataFrame:
    return frame({f"q{i}": {metric: v} for i, v in enumerate(values)})


def row(comparison, metric: str) -> dict:
    return comparison.table.set_index("metric").loc[metric].to_dict()


def assert_no_nan(table: pd.DataFrame) -> None:
    """Missing numbers are <NA> (pd.NA), never a float NaN."""
    for column in table.columns:
        for value in table[column]:
            assert not (isinstance(value, float) and np.isnan(value)), (column, table)


# --- Bootstrap interval -------------------------------------------------------------------------------


def test_the_interval_contains_the_true_delta_and_is_deterministic():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.9, 200)
    cand = np.clip(base - 0.1 + rng.normal(0, 0.05, 200), 0, 1)
    true_delta = float((cand - base).mean())
    baseline, candidate = one_metric("faithfulness", list(base)), one_metric("faithfulness", list(cand))

    first, second = row(compare(candidate, baseline), "faithfulness"), row(compare(candidate, baseline), "faithfulness")

    assert first["delta_ci_low"] <= true_delta <= first["delta_ci_high"]
    assert first["delta_ci_low"] < -0.08 and first["delta_ci_high"] < 0  # clearly a drop
    assert (first["delta_ci_low"], first["delta_ci_high"]) == (second["delta_ci_low"], second["delta_ci_high"])


def test_a_zero_difference_candidate_has_an_interval_around_zero():
    values = [0.2, 0.9, 0.5, 1.0, 0.0, 0.7, 0.4, 0.6]
    same = row(compare(one_metric("mrr", values), one_metric("mrr", values)), "mrr")
    assert same["delta_ci_low"] == 0.0 and same["delta_ci_high"] == 0.0

    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.05, 400)
    noisy = bootstrap_interval(pd.Series(noise - noise.mean()))  # differences with mean exactly 0
    assert noisy[0] < 0 < noisy[1] and noisy[1] - noisy[0] < 0.05


def test_the_interval_is_na_without_pairs_and_without_a_baseline():
    candidate = one_metric("faithfulness", [None, None])
    baseline = one_metric("faithfulness", [0.5, 0.5])

    for comparison in (compare(candidate, baseline), compare(one_metric("faithfulness", [0.5]), None)):
        assert comparison.table[["delta_ci_low", "delta_ci_high"]].isna().all().all()
        assert str(comparison.table["delta_ci_low"].dtype) == "Float64"
        assert_no_nan(comparison.table)


# --- Per-metric tolerance -------------------------------------------------------------------------------


def test_a_per_metric_tolerance_changes_the_verdict_of_that_metric_only():
    # Both metrics drop by 0.08; the default tolerance 0.05 blocks both.
    baseline = frame({f"q{i}": {"faithfulness": 0.8, "mrr": 0.8} for i in range(4)})
    candidate = frame({f"q{i}": {"faithfulness": 0.72, "mrr": 0.72} for i in range(4)})

    default = compare(candidate, baseline)
    loose_mrr = compare(candidate, baseline, {"mrr": 0.1})

    assert default.failing_metrics == ["faithfulness", "mrr"]
    assert loose_mrr.failing_metrics == ["faithfulness"] and loose_mrr.verdict == BLOCK
    assert (row(loose_mrr, "mrr")["tolerance"], row(loose_mrr, "faithfulness")["tolerance"]) == (0.1, 0.05)
    assert compare(candidate, baseline, {"default": 0.1, "faithfulness": 0.05}).failing_metrics == ["faithfulness"]
    assert compare(candidate, baseline, {"default": 0.1}).verdict == PASS
    markdown = render_markdown(loose_mrr, "r", {})
    assert "default 0.05; mrr 0.1" in markdown
    assert "| mrr | 0.720 | 0.800 | -0.080 [-0.080, -0.080] | 4/4 | 100% | 0.1 | ok |" in markdown


# --- Breakdown by question type --------------------------------------------------------------------------

GOLDEN = pd.DataFrame(
    {
        "qa_id": ["q0", "q1", "q2", "q3"],
        "question_type": ["simple", "simple", "reasoning", "reasoning"],
        "question": ["What is A?", "What is B?", "Why C?", "<script>alert(1)</script> why D?"],
        "ground_truth": ["a", "b", "c", "d"],
    }
)


def test_breakdown_by_type_on_a_hand_made_frame():
    baseline = frame({"q0": {"mrr": 1.0}, "q1": {"mrr": 0.5}, "q2": {"mrr": 1.0}, "q3": {"mrr": 1.0}})
    candidate = frame({"q0": {"mrr": 1.0}, "q1": {"mrr": 0.0}, "q2": {"mrr": 0.5}, "q3": {"mrr": None}})

    table = breakdown_by_type(candidate, baseline, GOLDEN).set_index(["question_type", "metric"])

    simple, reasoning = table.loc[("simple", "mrr")], table.loc[("reasoning", "mrr")]
    assert (simple["candidate_mean"], simple["baseline_mean"], simple["delta"], simple["n"]) == (0.5, 0.75, -0.25, 2)
    # q3 is unmeasured in the candidate: only q2 is paired.
    assert (reasoning["candidate_mean"], reasoning["baseline_mean"], reasoning["delta"], reasoning["n"]) == (
        0.5,
        1.0,
        -0.5,
        1,
    )
    assert_no_nan(table.reset_index())


def test_breakdown_without_baseline_has_na_baseline_and_no_nan():
    candidate = frame({"q0": {"mrr": 1.0}, "q2": {"mrr": 0.5}, "q9": {"mrr": 0.0}})

    table = breakdown_by_type(candidate, None, GOLDEN)

    assert set(table["question_type"]) == {"simple", "reasoning", "unknown"}  # q9 is not in the golden set
    assert table["baseline_mean"].isna().all() and table["delta"].isna().all()
    assert_no_nan(table)


# --- Quadrants -------------------------------------------------------------------------------------------


def test_item_stages_follow_the_documented_rules():
    scores = frame(
        {
            "good_good": {"hit_rate": 1.0, "faithfulness": 0.9, "answer_correctness": 0.6},
            "recall_fallback": {
                "hit_rate": None,
                "context_recall": 0.5,
                "faithfulness": 0.2,
                "answer_correctness": 0.9,
            },
            "bad_unclassified": {"hit_rate": 0.0, "faithfulness": 0.9, "answer_correctness": None},
            "nothing": {"hit_rate": None, "faithfulness": None},
        }
    )

    stages = item_stages(scores).set_index("qa_id")

    assert tuple(stages.loc["good_good"]) == ("good", "good")
    assert tuple(stages.loc["recall_fallback"]) == ("good", "bad")
    assert tuple(stages.loc["bad_unclassified"]) == ("bad", "unclassified")
    assert tuple(stages.loc["nothing"]) == ("unclassified", "unclassified")


def test_quadrant_counts_and_the_stage_that_regressed():
    good = {"hit_rate": 1.0, "faithfulness": 1.0, "answer_correctness": 1.0}
    bad_retrieval = {"hit_rate": 0.0, "faithfulness": 1.0, "answer_correctness": 1.0}
    bad_generation = {"hit_rate": 1.0, "faithfulness": 0.1, "answer_correctness": 1.0}
    baseline = frame({"q0": good, "q1": good, "q2": good, "q3": bad_generation})
    candidate = frame({"q0": good, "q1": bad_retrieval, "q2": bad_retrieval, "q3": good})

    counts = quadrant_counts(candidate, baseline).set_index(["run", "retrieval", "generation"])["n"]

    assert counts[("candidate", "good", "good")] == 2 and counts[("candidate", "bad", "good")] == 2
    assert counts[("baseline", "good", "good")] == 3 and counts[("baseline", "good", "bad")] == 1
    assert counts.groupby(level="run").sum().to_dict() == {"baseline": 4, "candidate": 4}
    assert stage_transitions(candidate, baseline) == {
        "retrieval": {"worse": 2, "better": 0},
        "generation": {"worse": 0, "better": 1},
    }
    assert stage_summary(candidate, baseline).startswith("Retrieval regressed most")
    assert stage_summary(baseline, baseline).startswith("Neither stage regressed")
    assert list(quadrant_counts(candidate, None)["run"].unique()) == ["candidate"]


# --- Worst items -----------------------------------------------------------------------------------------


def test_worst_items_are_ordered_by_drop_with_answers_and_evidence():
    drops = {"q0": 0.1, "q1": 0.7, "q2": 0.3, "q3": 0.0, "q4": 0.5, "q5": 0.2, "q6": 0.6, "q7": 0.4}
    baseline = frame({q: {"answer_correctness": 1.0} for q in drops})
    evidence = json.dumps({"statements": [{"statement": "x" * 1000, "verdict": 0}, {"statement": "ok", "verdict": 1}]})
    candidate = frame({q: {"answer_correctness": 1.0 - d} for q, d in drops.items()}, evidence=evidence)
    outputs = pd.DataFrame(
        {
            "qa_id": list(drops),
            "question": [f"question {q}" for q in drops],
            "answer": [f"new answer {q}" for q in drops],
        }
    )
    baseline_outputs = outputs.assign(answer=[f"old answer {q}" for q in drops])

    worst = worst_items(candidate, baseline, ["answer_correctness"], GOLDEN, outputs, baseline_outputs)

    assert worst["qa_id"].tolist() == ["q1", "q6", "q4", "q7", "q2"]
    assert worst["drop"].tolist() == pytest.approx([0.7, 0.6, 0.5, 0.4, 0.3])
    first = worst.iloc[0]
    assert (first["candidate_answer"], first["baseline_answer"]) == ("new answer q1", "old answer q1")
    assert first["question"] == "What is B?" and first["question_type"] == "simple"  # from the golden set
    assert worst.set_index("qa_id").loc["q7", "question"] == "question q7"  # not in the golden set: from the outputs
    assert first["evidence"].startswith('statements: 1 of 2 rejected: "xxx') and len(first["evidence"]) <= 300


def test_worst_items_take_each_item_once_and_skip_improvements():
    baseline = frame({"q0": {"faithfulness": 1.0, "mrr": 1.0}, "q1": {"faithfulness": 0.2, "mrr": 1.0}})
    candidate = frame({"q0": {"faithfulness": 0.5, "mrr": 0.0}, "q1": {"faithfulness": 0.9, "mrr": 1.0}})

    worst = worst_items(candidate, baseline, ["faithfulness", "mrr"])

    assert worst[["qa_id", "metric"]].values.tolist() == [["q0", "mrr"]]
    assert worst.iloc[0]["baseline_answer"] is None  # no outputs stored
    comparison = compare(candidate, baseline)
    analysis = analyse(comparison, candidate, baseline, outputs=pd.DataFrame({"qa_id": ["q0"], "answer": [""]}))
    markdown = render_markdown(comparison, "r", {}, analysis)
    assert "- baseline answer: (not stored)" in markdown and "- candidate answer: (empty answer)" in markdown
    assert "(not stored)" in render_html(comparison, "r", {}, analysis)
    assert worst_items(candidate, None, ["mrr"]).empty


# --- The whole analysis and its rendering ------------------------------------------------------------------


def full_case():
    metrics = ["hit_rate", "faithfulness", "answer_correctness", "mrr"]
    baseline = frame({q: {m: 1.0 for m in metrics} for q in GOLDEN["qa_id"]})
    candidate = frame(
        {
            "q0": {"hit_rate": 1.0, "faithfulness": 1.0, "answer_correctness": 1.0, "mrr": 1.0},
            "q1": {"hit_rate": 0.0, "faithfulness": 0.4, "answer_correctness": 0.3, "mrr": 0.0},
            "q2": {"hit_rate": 1.0, "faithfulness": None, "answer_correctness": 0.9, "mrr": 0.5},
            "q3": {"hit_rate": 0.0, "faithfulness": 0.2, "answer_correctness": 0.1, "mrr": 0.0},
        },
        evidence=json.dumps({"note": "<b>unsupported</b>"}),
    )
    outputs = GOLDEN[["qa_id", "question"]].assign(answer=["a", "b & <i>c</i>", "c", "d"])
    comparison = compare(candidate, baseline)
    return comparison, analyse(comparison, candidate, baseline, GOLDEN, outputs, outputs.assign(answer="old"))


def test_no_aggregate_contains_nan():
    comparison, analysis = full_case()
    for table in (comparison.table, analysis.breakdown, analysis.quadrants, analysis.worst):
        assert_no_nan(table)
    numbers = comparison.table[["candidate_mean", "baseline_mean", "delta", "delta_ci_low", "delta_ci_high"]]
    assert not numbers.isna().any().any()  # every metric has pairs here


def test_worst_items_rank_on_the_failing_metrics():
    comparison, analysis = full_case()
    assert analysis.worst_basis == comparison.failing_metrics
    assert analysis.worst["qa_id"].tolist() == ["q1", "q3", "q2"]  # q1 and q3 dropped by 1.0 (hit_rate)


def test_the_html_is_self_contained_escaped_and_has_one_bar_per_metric():
    comparison, analysis = full_case()

    html = render_html(comparison, "Report <acme>", {"commit": "a&b"}, analysis)

    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "http" not in html.lower()
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Report &lt;acme&gt;" in html and "a&amp;b" in html and "b &amp; &lt;i&gt;c&lt;/i&gt;" in html
    assert "&lt;b&gt;unsupported&lt;/b&gt;" in html
    assert html.count('class="bar candidate"') == len(comparison.table)
    assert html.count('class="bar baseline"') == len(comparison.table)
    assert html.count('class="whisker"') == len(comparison.table)
    assert "<svg" in html and "<style>" in html
    assert not re.search(r"\bnan\b", html.lower())


def test_the_markdown_has_the_new_sections():
    comparison, analysis = full_case()

    markdown = render_markdown(comparison, "Report", {}, analysis)

    assert "## By question type" in markdown and "| simple | mrr | 0.500 | 1.000 | -0.500 | 2 |" in markdown
    assert "## Which stage" in markdown and analysis.stage_summary in markdown
    assert "| candidate | retrieval good | 1 | 0 | 1 |" in markdown
    assert "## Worst regressed items" in markdown and "1. **q1**" in markdown
    assert "nan" not in markdown.lower()
    assert "- question: &lt;script&gt;alert(1)&lt;/script&gt; why D?" in markdown  # no raw tag in the metadata


def test_a_candidate_without_a_baseline_renders_both_formats():
    candidate = frame({"q0": {"hit_rate": 1.0, "faithfulness": None}})
    comparison = compare(candidate, None)
    analysis = analyse(comparison, candidate, None, GOLDEN)

    html = render_html(comparison, "r", {}, analysis)
    markdown = render_markdown(comparison, "r", {}, analysis)

    assert html.count('class="bar candidate"') == 2 and 'class="bar baseline"' not in html
    assert "No item scored lower" in markdown and "nan" not in markdown.lower()
