"""The gate deciding on prediction-powered intervals: the judge's calibration shown per metric, and a
verdict from the PPI delta interval (regressed, ok, or undecided when it straddles the tolerance)."""

import numpy as np
import pandas as pd
import pytest

from rag_eval_pipeline.reporting.compare import (
    BLOCK,
    PASS,
    UNDECIDED_BY_PPI,
    compare,
    decision,
)
from rag_eval_pipeline.reporting.trust import JudgeTrust, MissingLabels, require_labels
from rag_eval_pipeline_tests.test_reporting.test_compare import scores


def _trust(n: int, errors: float | list[float] = 0.0, metric: str = "faithfulness", commit: str = "") -> JudgeTrust:
    values = np.resize(np.asarray(errors, dtype=float), n)
    judge_scores = np.full(n, 0.5)
    labelled = pd.DataFrame(
        {
            "metric": metric,
            "label_key": [f"l{i}" for i in range(n)],
            "commit": commit,
            "score": judge_scores,
            "label": judge_scores + values,
        }
    )
    return JudgeTrust({metric: f"calibrated on {n} labels"}, labelled, "offline-test")


def _runs(drop: float, n: int = 200, spread: float = 0.0):
    rng = np.random.default_rng(0)
    base = np.clip(0.8 + rng.normal(0, spread, n), 0, 1) if spread else np.full(n, 0.8)
    return scores({"faithfulness": list(base - drop)}), scores({"faithfulness": list(base)})


def test_the_calibration_is_shown_and_a_metric_without_labels_is_called_uncalibrated():
    candidate, baseline = _runs(0.0)
    both = pd.concat([candidate, scores({"hit_rate": [1.0] * 200})])
    comparison = compare(both, pd.concat([baseline, scores({"hit_rate": [1.0] * 200})]), trust=_trust(30))
    shown = comparison.table.set_index("metric")["judge_calibration"]
    assert shown["faithfulness"] == "calibrated on 30 labels"
    assert shown["hit_rate"].startswith("no judge")
    bare = compare(candidate, baseline).table.set_index("metric")["judge_calibration"]
    assert bare["faithfulness"].startswith("uncalibrated")


def test_a_clear_drop_blocks_on_its_ppi_interval_and_no_drop_passes():
    candidate, baseline = _runs(0.3, spread=0.05)
    blocked = compare(candidate, baseline, tolerance=0.05, trust=_trust(40, [0.1, -0.1]), decide_on="ppi")
    assert blocked.verdict == BLOCK
    row = blocked.table.iloc[0]
    assert row["decided_on"] == "ppi" and row["ppi_delta_high"] < -0.05

    candidate, baseline = _runs(0.0, spread=0.05)
    passed = compare(candidate, baseline, tolerance=0.05, trust=_trust(40, [0.1, -0.1]), decide_on="ppi")
    assert passed.verdict == PASS and passed.table.iloc[0]["ppi_delta_low"] >= -0.05


def test_a_drop_the_labels_cannot_resolve_is_undecided_where_the_judge_alone_would_block():
    # The judge's paired delta is exactly -0.06 (beyond the 0.05 tolerance); the labels of the candidate's own
    # commit (its errors spread widely) widen the interval across -0.05.
    candidate, baseline = _runs(0.06)
    labelled = pd.concat(
        [
            _trust(12, [0.5, -0.5], commit="cand").labelled,
            _trust(12, [0.5, -0.5], commit="base").labelled.assign(label_key=lambda f: "b" + f["label_key"]),
        ]
    )
    trust = JudgeTrust({"faithfulness": "calibrated"}, labelled, "offline-test")
    by_judge = compare(candidate, baseline, tolerance=0.05, trust=trust, commits=("cand", "base"))
    assert by_judge.verdict == BLOCK
    by_ppi = compare(candidate, baseline, tolerance=0.05, trust=trust, decide_on="ppi", commits=("cand", "base"))
    assert by_ppi.verdict == UNDECIDED_BY_PPI and decision(by_ppi.verdict) == "undecided"
    assert "straddles" in by_ppi.table.iloc[0]["note"]


def test_labels_of_the_candidates_own_commit_correct_only_its_side():
    candidate, baseline = _runs(0.0)
    own = _trust(20, -0.3, commit="cand").labelled
    others = _trust(20, 0.0, commit="old").labelled.assign(label_key=lambda f: "o" + f["label_key"])
    trust = JudgeTrust({}, pd.concat([own, others]), "offline-test")
    row = compare(candidate, baseline, trust=trust, commits=("cand", "base")).table.iloc[0]
    # The candidate is corrected by its own labels (-0.3), the baseline by all 40 (-0.15).
    assert row["ppi_delta"] == pytest.approx(-0.15, abs=1e-3)
    assert "cand" in row["ppi_note"]


def test_deciding_on_ppi_without_labels_is_refused_in_one_line_naming_what_is_missing():
    with pytest.raises(MissingLabels) as refused:
        require_labels(_trust(3), ["faithfulness", "answer_relevance", "hit_rate"], "acme")
    message = str(refused.value)
    assert "\n" not in message and "acme" in message and "faithfulness 3" in message and "answer_relevance 0" in message
    require_labels(_trust(10), ["faithfulness", "answer_relevance"], "acme")  # one labelled metric is enough


def test_a_candidate_that_answered_fewer_items_stays_blocked_whatever_the_ppi_interval_says():
    base = [0.8] * 200
    candidate = scores({"faithfulness": [None] * 30 + [0.7] * 170})
    labelled = pd.concat(
        [
            _trust(20, 0.3, commit="cand").labelled,
            _trust(20, 0.0, commit="base").labelled.assign(label_key=lambda f: "b" + f["label_key"]),
        ]
    )
    trust = JudgeTrust({}, labelled, "offline-test")
    by_ppi = compare(candidate, scores({"faithfulness": base}), trust=trust, decide_on="ppi", commits=("cand", "base"))
    assert by_ppi.verdict == BLOCK
    row = by_ppi.table.iloc[0]
    assert row["decided_on"] == "judge" and "gave nothing to measure on 30" in row["note"]


def test_a_candidate_with_no_measured_item_gets_its_verdict_not_an_error():
    candidate = scores({"faithfulness": [None] * 50})
    comparison = compare(candidate, scores({"faithfulness": [0.8] * 50}), trust=_trust(20), decide_on="ppi")
    assert comparison.verdict == BLOCK  # it answered nothing: the coverage rule decides, PPI has nothing to say
    assert comparison.table.iloc[0]["ppi_note"] == "no measured item: no PPI interval"


def test_junit_reports_an_undecided_metric_as_an_error_never_a_pass():
    from rag_eval_pipeline.reporting.junit import junit_xml

    candidate, baseline = _runs(0.06)
    labelled = pd.concat(
        [
            _trust(12, [0.5, -0.5], commit="cand").labelled,
            _trust(12, [0.5, -0.5], commit="base").labelled.assign(label_key=lambda f: "b" + f["label_key"]),
        ]
    )
    trust = JudgeTrust({}, labelled, "offline-test")
    table = compare(candidate, baseline, tolerance=0.05, trust=trust, decide_on="ppi", commits=("cand", "base")).table
    xml = junit_xml(table, "gate")
    assert 'errors="1"' in xml and "straddles" in xml
