"""The pytest plugin as a team uses it: a test file with assert_rag, run by pytest in a fresh process (the
plugin comes with the installed package), and the session evaluator's batching in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.testing import Case, RagAssertionError, RagEvaluator

CONTEXT = "Refunds are paid within 14 days of the return."
TEAM_TESTS = textwrap.dedent(
    f"""
    from rag_eval_pipeline import assert_rag

    CONTEXT = {CONTEXT!r}
    TRUTH = "Refunds are paid within 14 days."

    def test_a_faithful_answer():
        assert_rag("How long do refunds take?", [CONTEXT], "Refunds are paid within 14 days.", TRUTH,
                   min_scores={{"faithfulness": 0.8}})

    def test_a_hallucinated_answer():
        assert_rag("How long do refunds take?", [CONTEXT], "Refunds are paid within 45 days.", TRUTH,
                   min_scores={{"faithfulness": 0.8, "hit_rate": 0.5}}, gold_chunk_ids=["context-1"])

    def test_an_answer_with_nothing_to_verify(rag_evaluator):
        rag_evaluator.assert_rag("How long do refunds take?", [CONTEXT], "I do not know.", TRUTH,
                                 min_scores={{"faithfulness": 0.5}})
    """
)


def _pytest(tmp_path, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "test_team.py").write_text(TEAM_TESTS)
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"), "RAG_EVAL_JUDGE": "offline"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs", "test_team.py"]
        + [f"--junitxml={junit}", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    return done, cases


@pytest.mark.cli
def test_a_failing_metric_fails_its_test_naming_the_metric_score_threshold_and_evidence(tmp_path):
    done, cases = _pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed, 1 skipped" in done.stdout
    failure = cases["test_a_hallucinated_answer"].find("failure")
    assert failure is not None
    message = failure.get("message", "") + (failure.text or "")
    assert (
        "faithfulness 0.000 < 0.8 (judge offline-support-v3): unsupported: Refunds are paid within 45 days." in message
    )
    assert "hit_rate" not in failure.get("message", "")  # the chunk was retrieved: that metric passed
    assert cases["test_a_faithful_answer"].find("failure") is None
    skipped = cases["test_an_answer_with_nothing_to_verify"].find("skipped")
    assert skipped is not None and "faithfulness unmeasured (threshold 0.5)" in skipped.get("message", "")
    assert "rag-eval: 3 assertions, judge offline-support-v3; 1 met an unmeasured metric (skipped" in done.stdout


@pytest.mark.cli
def test_unmeasured_can_be_set_to_fail(tmp_path):
    done, cases = _pytest(tmp_path, "--rag-unmeasured", "fail")
    assert done.returncode == 1 and "2 failed, 1 passed" in done.stdout, done.stdout
    failure = cases["test_an_answer_with_nothing_to_verify"].find("failure")
    assert failure is not None and "the answer makes no statement to verify" in (failure.text or "")


class CountingJudge(OfflineJudge):
    def __init__(self, embedder):
        super().__init__(embedder)
        self.batches: list[int] = []

    def judge_many(self, items, needs):
        self.batches.append(len(items))
        return super().judge_many(items, needs)


def test_a_sessions_assertions_share_one_judge_and_a_prefetched_batch(embedder):
    judge = CountingJudge(embedder)
    evaluator = RagEvaluator()
    evaluator._built = (judge, embedder)  # the judge the session would have built
    cases = [
        Case("How long do refunds take?", (CONTEXT,), answer, "Refunds are paid within 14 days.")
        for answer in ("Refunds are paid within 14 days.", "Refunds are paid within 45 days.", "Within 14 days.")
    ]
    evaluator.prefetch(cases, ["faithfulness", "answer_relevance"])
    assert judge.batches == [3]
    first, second = cases[0], cases[1]
    evaluator.assert_rag(first.question, first.contexts, first.answer, first.ground_truth, {"faithfulness": 0.9})
    with pytest.raises(RagAssertionError, match="faithfulness 0.000 < 0.9"):
        evaluator.assert_rag(
            second.question, second.contexts, second.answer, second.ground_truth, {"faithfulness": 0.9}
        )
    assert judge.batches == [3]  # answered from the batch (of more metrics than asserted): no more judge calls
    evaluator.assert_rag("Another?", (CONTEXT,), "Yes.", min_scores={"hit_rate": 1}, gold_chunk_ids=["context-1"])
    assert judge.batches == [3]  # hit rate needs no judge


@pytest.mark.parametrize(
    "min_scores, message",
    [
        ({"faithfulness": 1.5}, "must be a number in [0, 1]"),
        ({"faithfulness": "high"}, "must be a number"),
        ({}, "needs"),
    ],
)
def test_a_bad_threshold_is_refused(embedder, min_scores, message):
    evaluator = RagEvaluator()
    evaluator._built = (OfflineJudge(embedder), embedder)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        evaluator.assert_rag("Q?", (CONTEXT,), "A.", min_scores=min_scores)


def test_a_metric_asked_for_without_a_threshold_is_never_a_pass_unmeasured(embedder):
    evaluator = RagEvaluator(unmeasured="fail")
    evaluator._built = (OfflineJudge(embedder), embedder)
    with pytest.raises(RagAssertionError, match="hit_rate unmeasured: item has no gold chunk ids"):
        evaluator.assert_rag("Q?", (CONTEXT,), "Refunds take 14 days.", metrics=["hit_rate"])
    skipping = RagEvaluator()
    skipping._built = evaluator._built
    with pytest.raises(pytest.skip.Exception, match="hit_rate unmeasured"):
        skipping.assert_rag("Q?", (CONTEXT,), "Refunds take 14 days.", metrics=["hit_rate"])


def test_a_threshold_named_with_stray_spaces_still_asserts(embedder):
    evaluator = RagEvaluator()
    evaluator._built = (OfflineJudge(embedder), embedder)
    with pytest.raises(RagAssertionError, match="faithfulness 0.000 < 0.9"):
        evaluator.assert_rag("Q?", (CONTEXT,), "Refunds are paid within 45 days.", min_scores={"faithfulness ": 0.9})
