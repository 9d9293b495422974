"""The offline judge's abstentions count against coverage: below the floor the gate cannot decide, never passes.

The reasons are the ones the judge writes (core/judging/results.py); the last test scores real answers
with the judge, so the whole path from its Failure to the verdict is exercised.
"""

from __future__ import annotations

import pandas as pd

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.evaluation.scoring import metric_rows
from rag_eval_pipeline.reporting.compare import PASS, UNMEASURED, compare
from rag_eval_pipeline.reporting.render import render_markdown
from rag_eval_pipeline_tests.test_evaluation.test_abstention import (
    ANSWER_NOT_ENGLISH,
    CONTEXTS,
    LONG,
    LONG_REASON,
    PARAPHRASE_REASON,
    QUESTION,
    SHORT,
)
from rag_eval_pipeline_tests.test_reporting.test_coverage_floor import table, verdicts


def markdown(comparison) -> str:
    return render_markdown(comparison, "report", {})


def test_abstentions_below_the_floor_leave_the_gate_undecided_not_passing():
    baseline = table(faithfulness=[1.0] * 10, hit_rate=[1.0] * 10)
    candidate = table(faithfulness=[1.0] * 7 + [LONG_REASON] * 3, hit_rate=[1.0] * 10)  # 70% < 80%

    comparison = compare(candidate, baseline)

    assert comparison.verdict == UNMEASURED
    assert verdicts(comparison) == {"faithfulness": "unmeasured", "hit_rate": "ok"}
    note = comparison.table.set_index("metric").at["faithfulness", "note"]
    assert note.startswith("candidate measured on 7 of 10 items (70%, floor 80%)")
    assert f"{LONG_REASON} (3 items)" in note
    # The same scores without the abstentions pass: it is the abstentions that keep the gate from deciding.
    assert compare(table(faithfulness=[1.0] * 10, hit_rate=[1.0] * 10), baseline).verdict == PASS
    assert compare(candidate, baseline, min_coverage=0.7).verdict == PASS


def test_the_report_counts_the_abstentions_with_their_reasons():
    candidate = table(faithfulness=[1.0] * 7 + [LONG_REASON] * 2 + [PARAPHRASE_REASON])

    text = markdown(compare(candidate, table(faithfulness=[1.0] * 10)))

    assert "faithfulness: abstained: the offline judge declined 3 items" in text
    assert f"{LONG_REASON} (2 items)" in text and f"{PARAPHRASE_REASON} (1 item)" in text


def test_the_report_says_at_least_when_it_lists_only_some_reasons():
    """The note lists the two most frequent reasons; a third one is folded into "1 other reasons"."""
    candidate = table(faithfulness=[1.0] * 17 + [LONG_REASON] * 1 + [PARAPHRASE_REASON] * 1 + [ANSWER_NOT_ENGLISH])

    text = markdown(compare(candidate, None))

    assert "abstained: the offline judge declined at least 2 items" in text


def test_the_baselines_abstentions_are_not_counted_as_the_candidates():
    baseline = table(faithfulness=[1.0] * 5 + [LONG_REASON] * 5)
    candidate = table(faithfulness=[1.0] * 10)

    text = markdown(compare(candidate, baseline))

    assert "baseline measured on 5 of 10" in text  # the baseline's abstentions are in its note...
    assert "abstained:" not in text  # ...but they are not the candidate's


def test_answers_the_judge_abstains_on_lower_coverage_through_the_whole_path(embedder):
    """Ten answers scored by the offline judge, four of them long: 60% coverage, so the gate cannot decide;
    the same answers scored by today's judge (the baseline) were all measured."""
    answers = [SHORT] * 6 + [LONG] * 4
    items = [
        EvalItem(f"q{i}", QUESTION, answer, [dict(c) for c in CONTEXTS], SHORT, ["api.md#0"])
        for i, answer in enumerate(answers)
    ]

    def scores(judge) -> pd.DataFrame:
        results, _ = score_items(items, judge, embedder, ["faithfulness"])
        return pd.DataFrame(metric_rows(zip(({"qa_id": item.qa_id} for item in items), results)))

    candidate, baseline = scores(OfflineJudge(embedder)), scores(OfflineJudge(embedder, abstention=None))

    comparison = compare(candidate, baseline)

    assert comparison.verdict == UNMEASURED and comparison.unmeasured_metrics == ["faithfulness"]
    assert "abstained: the offline judge declined 4 items" in markdown(comparison)
