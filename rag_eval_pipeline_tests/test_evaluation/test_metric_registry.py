"""The metric registry: each metric declared once, and what is derived from it; metrics of a team's own."""

from __future__ import annotations

import importlib
import math
import sys
import textwrap

import pytest

from rag_eval_pipeline.core.judging.criteria import OFFLINE_CANNOT_GRADE, Criterion
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS, CORRECTNESS, Judgement, Verdict
from rag_eval_pipeline.core.judging.llm_judge import call_serves, calls_serving
from rag_eval_pipeline.core.judging.results import JUDGE, NOT_APPLICABLE, OK, UNMEASURED, unmeasured_cause
from rag_eval_pipeline.core.metrics.metric import Scoring
from rag_eval_pipeline.core.metrics.registry import (
    BUILTIN,
    BUILTIN_METRICS,
    JUDGED_METRICS,
    RETRIEVAL_METRICS,
    discover,
    needed_judgements,
    resolve,
    scoring_name,
    tolerances,
)
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.evaluation.user_metrics import (
    ENTRY_POINT_GROUP,
    MetricError,
    criterion,
    metric,
    metric_named,
    resolve_metrics,
)
from rag_eval_pipeline_tests.test_evaluation.test_metrics import item


@pytest.fixture
def team_package(tmp_path, monkeypatch):
    """A package of a team's own, importable, with the allow-list naming it; write(name, source) adds a module."""
    root = tmp_path / "site"
    (root / "team_metrics").mkdir(parents=True)
    (root / "team_metrics" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "team_metrics")

    def write(module: str, source: str) -> str:
        (root / "team_metrics" / f"{module}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        return f"team_metrics.{module}"

    yield write
    for name in [m for m in sys.modules if m.startswith("team_metrics")]:
        del sys.modules[name]


# ---- the registry ------------------------------------------------------------------------------


def test_the_metric_lists_come_from_the_declarations():
    assert BUILTIN_METRICS == (
        "hit_rate",
        "mrr",
        "faithfulness",
        "answer_relevance",
        "context_recall",
        "context_precision",
        "contextual_relevancy",
        "answer_correctness",
    )
    assert RETRIEVAL_METRICS == ("hit_rate", "mrr")
    assert set(JUDGED_METRICS) == {name for name, m in BUILTIN.items() if m.needs}
    assert needed_judgements(resolve(["faithfulness", "hit_rate"])) == {ANSWER_STATEMENTS}


def test_the_calls_that_serve_a_metric_follow_from_what_it_needs():
    served = call_serves(resolve(BUILTIN_METRICS))
    assert served["ground_truth"] == ("context_recall", "context_precision")
    assert "faithfulness" in served["answer"] and "answer_correctness" in served["answer_statements"]
    assert calls_serving(()) == ()  # hit rate and MRR: no call
    assert {"correctness", "answer_statements"} <= set(calls_serving((CORRECTNESS,)))  # and the statements it reads
    assert "criterion" in calls_serving((Criterion("Polite."),))


def test_a_metric_on_an_existing_primitive_is_one_file(tmp_path, monkeypatch):
    """The built-ins are found by walking their package: a new module declaring METRIC is a new metric, in the
    order its position says."""
    package = tmp_path / "more_metrics"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "supported_statements.py").write_text(
        textwrap.dedent(
            """
            from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS
            from rag_eval_pipeline.core.judging.results import measured
            from rag_eval_pipeline.core.metrics.metric import Metric

            def count(scoring):
                verdicts = scoring.judgement.answer_statements
                return measured("supported_statements", min(1.0, sum(v.verdict for v in verdicts) / 4))

            METRIC = Metric("supported_statements", count, needs=(ANSWER_STATEMENTS,), position=5)
            """
        )
    )
    (package / "first.py").write_text(
        "from rag_eval_pipeline.core.metrics.builtin.mrr import METRIC as MRR\n"
        "from dataclasses import replace\nMETRIC = replace(MRR, name='first', position=1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover(importlib.import_module("more_metrics"))
    assert list(found) == ["first", "supported_statements"]
    assert found["supported_statements"].judged and needed_judgements(list(found.values())) == {ANSWER_STATEMENTS}


def test_an_unknown_built_in_name_is_refused():
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        resolve(["faithfulness", "bleu"])


# ---- a team's Python metric ------------------------------------------------------------------------


def test_a_function_of_the_item_scores_each_item(embedder, team_package):
    module = team_package(
        "length",
        """
        def short(item):
            '''1 when the answer is at most five words.'''
            return 1.0 if len(item.answer.split()) <= 5 else 0
        """,
    )
    name = f"{module}:short"
    chosen = resolve_metrics(["hit_rate", name])
    assert [m.name for m in chosen] == ["hit_rate", name] and not chosen[1].judged
    long_answer = item(answer="RouteWise keeps API request logs for ninety days.")
    results, _ = score_items([item(answer="Ninety days."), long_answer], OfflineJudge(embedder), embedder, chosen)
    assert [r[1].score for r in results] == [1.0, 0.0]
    assert chosen[1].description == "1 when the answer is at most five words."


def test_what_a_metric_function_returns_or_raises_is_a_score_or_unmeasured_with_why(embedder, team_package):
    module = team_package(
        "verdicts",
        """
        import math
        from rag_eval_pipeline import metric, Unmeasured

        @metric(needs=["answer_statements"], tolerance=0.02, version="3")
        def share_supported(item, judgement):
            statements = judgement.answer_statements
            if not statements:
                return Unmeasured("no statement", not_applicable=True)
            if item.question == "boom?":
                raise RuntimeError("the team's bug")
            if item.question == "nan?":
                return math.nan
            if item.question == "big?":
                return 1.5
            return sum(v.verdict for v in statements) / len(statements)
        """,
    )
    found = metric_named(f"{module}:share_supported")
    assert found.needs == (ANSWER_STATEMENTS,) and found.tolerance == 0.02 and found.identity == "3"

    def score(question: str, statements) -> object:
        return found.score(Scoring(item(question=question), Judgement(answer_statements=statements), embedder, 5))

    supported = [Verdict("a", 1), Verdict("b", 0)]
    assert score("q?", supported).score == 0.5
    empty = score("q?", [])
    assert empty.status == UNMEASURED and unmeasured_cause(empty.reason) == NOT_APPLICABLE
    for question, why in (("boom?", "raised RuntimeError: the team's bug"), ("nan?", "returned nan"), ("big?", "1.5")):
        result = score(question, supported)
        assert result.status == UNMEASURED and why in result.reason and unmeasured_cause(result.reason) == JUDGE
    from rag_eval_pipeline.core.judging.judgement import Failure

    failed = score("q?", Failure("judge timed out"))
    assert failed.status == UNMEASURED and failed.reason == "judge timed out"


def test_a_metric_outside_the_allow_list_or_broken_is_refused_in_one_line(team_package, monkeypatch):
    module = team_package("broken", "raise ImportError('no such dependency')\n")
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "")
    with pytest.raises(MetricError, match="not in an allowed package") as refused:
        metric_named("os:system")
    assert "\n" not in str(refused.value)
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "team_metrics")
    with pytest.raises(MetricError, match="cannot import metric module 'team_metrics.broken': ImportError"):
        metric_named(f"{module}:anything")
    with pytest.raises(MetricError, match="is a built-in metric's"):
        resolve_metrics([metric(lambda item: 1.0, name="faithfulness")])
    with pytest.raises(MetricError, match="tolerance must be between 0 and 1"):
        metric(tolerance=2)
    with pytest.raises(MetricError, match="unknown judgements"):
        metric(needs=["vibes"])


def test_a_changed_function_is_a_new_version_and_joins_the_judges_name(team_package):
    v1, v2 = team_package("v1", "def m(item):\n    return 1.0\n"), team_package("v2", "def m(item):\n    return 0.5\n")
    first, second = metric_named(f"{v1}:m"), metric_named(f"{v2}:m")
    assert first.identity != second.identity
    assert scoring_name("offline-support-v3", (BUILTIN["faithfulness"], first)) == (
        f"offline-support-v3+{first.name}@{first.identity}"
    )
    assert scoring_name("offline-support-v3", resolve(BUILTIN_METRICS)) == "offline-support-v3"  # built-ins: as before
    # The order a metric set is named in does not change whose scores they are (a calibration finds them).
    assert scoring_name("j", (first, second)) == scoring_name("j", (second, first))


def test_an_entry_point_names_a_metric_by_its_short_name(tmp_path, monkeypatch):
    """An installed package declares it (the allow-list is for module paths given at run time)."""
    site = tmp_path / "installed"
    (site / "acme_metrics-1.0.dist-info").mkdir(parents=True)
    (site / "acme_metrics-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-metrics\nVersion: 1.0\n"
    )
    (site / "acme_metrics-1.0.dist-info" / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nacme_brevity = acme_metrics:brevity\n"
    )
    (site / "acme_metrics.py").write_text("def brevity(item):\n    return 1.0 / (1 + len(item.answer.split()))\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "")
    found = metric_named("acme_brevity")
    assert found.name == "acme_brevity" and found.identity
    with pytest.raises(MetricError, match="unknown metric 'acme_length'"):
        metric_named("acme_length")


def test_declared_tolerances_are_the_metrics_own():
    strict = metric(lambda item: 1.0, name="strict", tolerance=0.01)
    assert tolerances(resolve_metrics(["faithfulness", strict])) == {"strict": 0.01}


# ---- a criterion ----------------------------------------------------------------------------------


def test_a_criterion_is_versioned_by_what_the_judge_is_asked():
    polite = criterion("The answer is polite.", steps=["Read it.", "Judge its tone."], name="polite")
    assert polite.key == criterion("The answer is polite.", steps=["Read it.", "Judge its tone."]).key
    assert polite.key != criterion("The answer is polite and brief.", steps=["Read it.", "Judge its tone."]).key
    assert polite.key != criterion("The answer is polite.", steps=["Read it."]).key
    assert polite.key != criterion("The answer is polite.", steps=["Read it.", "Judge its tone."], reads=["answer"]).key
    assert resolve_metrics([polite])[0].identity == f"criterion-{polite.key}"
    prompt = polite.prompt({"question": "Q?", "answer": "A.", "contexts": "", "ground_truth": ""})
    assert "CRITERION: The answer is polite." in prompt and "1. Read it.\n2. Judge its tone." in prompt
    assert "exactly 2 short notes" in prompt
    with pytest.raises(MetricError, match="reads some of"):
        criterion("x", reads=["vibes"])
    with pytest.raises(MetricError, match="needs a name"):
        resolve_metrics([criterion("The answer is polite.")])


def test_the_offline_judge_says_it_cannot_grade_a_criterion(embedder):
    polite = resolve_metrics([criterion("The answer is polite.", name="polite")])
    results, _ = score_items([item()], OfflineJudge(embedder), embedder, polite)
    assert results[0][0].status == UNMEASURED and results[0][0].reason == OFFLINE_CANNOT_GRADE


def test_a_criterion_grade_maps_to_the_unit_interval(embedder):
    polite = criterion("The answer is polite.", name="polite")
    (found,) = resolve_metrics([polite])
    from rag_eval_pipeline.core.judging.judgement import CriterionVerdict

    graded = [
        found.score(Scoring(item(), Judgement(criteria={polite.key: CriterionVerdict(grade, ["ok"])}), embedder, 5))
        for grade in (1, 3, 5)
    ]
    assert [g.score for g in graded] == [0.0, 0.5, 1.0] and all(g.status == OK for g in graded)
    assert (
        graded[0].evidence == {"grade": 1, "step_findings": ["ok"]} and found.evidence_line(graded[0].evidence) == "ok"
    )
    assert math.isclose(graded[1].score, 0.5)
