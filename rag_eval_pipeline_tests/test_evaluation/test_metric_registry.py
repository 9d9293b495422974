"""The metric registry: each metric declared once, and what is derived from it; metrics of a team's own."""

from __future__ import annotations

import importlib
import math
import os
import subprocess
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
    Unmeasured,
    _imported,
    _loaded,
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
    _imported.cache_clear()
    _loaded.cache_clear()


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


# ---- what a team's code cannot do (found by a hostile review) ---------------------------------------


def test_a_metric_module_that_exits_at_import_is_refused_in_one_line(team_package):
    """It made `rag-eval gate` exit 0, read as a pass, with no audit and no word."""
    module = team_package("exits", "import sys\nsys.exit()\n")
    with pytest.raises(MetricError, match="cannot import metric module 'team_metrics.exits': SystemExit"):
        metric_named(f"{module}:anything")


def test_whatever_a_metric_raises_or_prints_or_changes_stays_with_its_own_score(embedder, team_package, capsys):
    module = team_package(
        "rude",
        """
        import sys

        class Custom(BaseException):
            pass

        def exits(item):
            sys.exit(0)

        def custom(item):
            raise Custom("mine")

        def chatty(item):
            print("gate: PASS")
            return 1.0

        def mutates(item):
            item.contexts.clear()
            item.gold_chunk_ids.clear()
            return 1.0
        """,
    )
    chosen = resolve_metrics([f"{module}:{name}" for name in ("exits", "custom", "chatty", "mutates")] + ["hit_rate"])
    [results], _ = score_items([item()], OfflineJudge(embedder), embedder, chosen)
    by_name = {r.metric.rsplit(":", 1)[-1]: r for r in results}
    assert by_name["exits"].status == UNMEASURED and "raised SystemExit" in by_name["exits"].reason
    assert by_name["custom"].status == UNMEASURED and "raised Custom: mine" in by_name["custom"].reason
    assert by_name["chatty"].score == 1.0 and by_name["mutates"].score == 1.0
    assert by_name["hit_rate"].score == 1.0  # the item the next metric reads is as it was
    printed = capsys.readouterr()
    assert "gate: PASS" not in printed.out and "gate: PASS" in printed.err  # never on a command's stdout


def test_a_name_that_reaches_code_outside_the_allowed_package_is_refused(team_package):
    module = team_package("imports", "import sys\nfrom os.path import basename\n")
    with pytest.raises(MetricError, match="names a module"):
        metric_named(f"{module}:sys.exit")
    with pytest.raises(MetricError, match="runs code of module 'posixpath', outside the allowed packages"):
        metric_named(f"{module}:basename")


@pytest.mark.parametrize("name", ["id", "error", "faithfulness_status", "a|b", "two words", "line\nbreak", ""])
def test_a_name_that_cannot_be_a_column_is_refused(name):
    with pytest.raises(MetricError):
        resolve_metrics([metric(lambda item: 1.0, name=name)] if name else [criterion("x", name="=x")])


def test_a_metric_object_gets_the_guards_and_a_version_of_its_own(embedder):
    from rag_eval_pipeline.core.judging.results import measured
    from rag_eval_pipeline.core.metrics.metric import Metric

    fake = Metric("faithfulness", lambda scoring: measured("faithfulness", 1.0))
    with pytest.raises(MetricError, match="is a built-in metric's"):
        resolve_metrics([fake])
    broken = Metric("broken", lambda scoring: 1 / 0)
    (found,) = resolve_metrics([broken])
    assert found.identity and found.identity == resolve_metrics([broken])[0].identity
    [results], _ = score_items([item()], OfflineJudge(embedder), embedder, [found])
    assert results[0].status == UNMEASURED and "raised ZeroDivisionError" in results[0].reason


def test_an_unmeasured_reason_of_the_team_never_reads_as_one_the_gate_treats_otherwise(embedder):
    """`item has no gold chunk ids` is a built-in's not-applicable reason: from a team's metric it passed."""
    (found,) = resolve_metrics([metric(lambda item: Unmeasured("item has no gold chunk ids"), name="team")])
    result = found.score(Scoring(item(), Judgement(), embedder, 5))
    assert result.reason == "metric team: item has no gold chunk ids" and unmeasured_cause(result.reason) == JUDGE


def test_a_version_changes_with_what_the_code_computes(team_package):
    helper = team_package(
        "helped",
        "LIMIT = 10\ndef _helper(item):\n    return len(item.answer) <= LIMIT\n"
        "def short(item):\n    return float(_helper(item))\n",
    )
    before = metric_named(f"{helper}:short").identity
    _imported.cache_clear(), _loaded.cache_clear()
    del sys.modules[helper]
    team_package(
        "helped",
        "LIMIT = 1000\ndef _helper(item):\n    return len(item.answer) <= LIMIT\n"
        "def short(item):\n    return float(_helper(item))\n",
    )
    assert metric_named(f"{helper}:short").identity != before  # a constant the function reads changed

    factory = team_package(
        "factory",
        "def at_most(words):\n    def short(item):\n"
        "        return float(len(item.answer.split()) <= words)\n    return short\n"
        "LOOSE, STRICT = at_most(100), at_most(2)\n",
    )
    loose, strict = metric_named(f"{factory}:LOOSE"), metric_named(f"{factory}:STRICT")
    assert loose.identity != strict.identity  # the same source, another closure


def test_a_callable_objects_version_is_the_same_in_every_process(team_package, tmp_path):
    module = team_package(
        "objects",
        """
        import functools

        class AtMost:
            def __init__(self, words):
                self.words = words

            def __call__(self, item):
                return float(len(item.answer.split()) <= self.words)

        def at_most(words, item):
            return float(len(item.answer.split()) <= words)

        instance = AtMost(5)
        bound = functools.partial(at_most, 5)
        """,
    )
    probe = (
        "from rag_eval_pipeline.evaluation.user_metrics import metric_named\n"
        f"print(metric_named('{module}:instance').identity, metric_named('{module}:bound').identity)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{sys.path[0]}:{os.environ.get('PYTHONPATH', '')}"}
    runs = [
        subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout and len(runs[0].stdout.split()) == 2
