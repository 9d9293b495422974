"""Assertions for a team's own pytest suite: `assert_rag` on one answer, `assert_gate` on a golden set.

    from rag_eval_pipeline import assert_rag

    def test_refund_answer():
        assert_rag(
            "How long do refunds take?",
            contexts=["Refunds are paid within 14 days of the return."],
            answer="Refunds take 14 days.",
            ground_truth="Refunds are paid within 14 days.",
            min_scores={"faithfulness": 0.8, "answer_correctness": 0.5},
        )

A metric below its threshold fails the test with the metric, its score, the threshold and the judge's
evidence. A metric the judge could not measure is never a pass: the test is skipped with the reason, or
fails when unmeasured is set to "fail" (`--rag-unmeasured fail`, or `rag_eval_unmeasured = fail` in the
pytest ini). The pytest plugin (pytest_plugin.py) makes one `RagEvaluator` per session, shared by every
assertion: the judge, the embedding model and the judge's call cache load once, and `prefetch(cases)`
scores many cases in one batch (the LLM judge's calls run concurrently) before the tests assert on them.
The judge's options come from the same settings as the CLI's (RAG_EVAL_JUDGE_*), or `--rag-judge`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_eval_pipeline.core.judging.results import MetricResult
    from rag_eval_pipeline.core.metrics.metric import Metric
    from rag_eval_pipeline.reporting.verdict import GateVerdict

UNMEASURED_POLICIES = ("skip", "fail")


class RagAssertionError(AssertionError):
    """A metric scored below its threshold (or, when unmeasured is "fail", could not be measured)."""


class RagUnmeasured(Exception):
    """A metric could not be measured, outside pytest (inside it the test is skipped with the reason)."""


@dataclass(frozen=True)
class Case:
    """One answer to score: what `assert_rag` and `prefetch` take."""

    question: str
    contexts: Sequence[str | Mapping[str, str]] = ()
    answer: str = ""
    ground_truth: str = ""
    gold_chunk_ids: Sequence[str] = ()

    def record(self) -> dict:
        contexts = [dict(c) if isinstance(c, Mapping) else c for c in self.contexts]
        return {
            "question": self.question,
            "contexts": contexts,
            "answer": self.answer,
            "ground_truth": self.ground_truth,
            "gold_chunk_ids": list(self.gold_chunk_ids),
        }

    def key(self) -> str:
        # repr for what JSON cannot hold: such a case is refused when read, with its reason, not here
        return hashlib.sha256(json.dumps(self.record(), sort_keys=True, default=repr).encode("utf-8")).hexdigest()


@dataclass
class RagEvaluator:
    """Scores cases with one judge and embedder, loaded on first use and kept, and remembers each case's
    results, so that a session's assertions share the judge's batching and caches."""

    judge: Any = None  # the judge's options, as the API's evaluate() takes them (None: RAG_EVAL_JUDGE_*)
    unmeasured: str = "skip"
    k: int = 5
    _built: tuple | None = field(default=None, repr=False)
    _scored: dict = field(default_factory=dict, repr=False)
    assertions: int = 0
    unmeasured_seen: int = 0

    def __post_init__(self) -> None:
        if self.unmeasured not in UNMEASURED_POLICIES:
            raise ValueError(f"unmeasured must be 'skip' or 'fail', got {self.unmeasured!r}")

    @property
    def judge_name(self) -> str:
        return self._judge_and_embedder()[0].name

    def prefetch(self, cases: Iterable[Case], metrics: Iterable[Any]) -> None:
        """Score these cases now, in one batch; later assertions on them, of any of these metrics, read the results."""
        self._score(list(cases), self._metrics(metrics))

    def assert_rag(
        self,
        question: str,
        contexts: Sequence[str | Mapping[str, str]] = (),
        answer: str = "",
        ground_truth: str = "",
        min_scores: Mapping[str, float] | None = None,
        metrics: Iterable[Any] = (),
        gold_chunk_ids: Sequence[str] = (),
    ) -> dict[str, MetricResult]:
        thresholds = _thresholds(min_scores or {})
        given = self._metrics(metrics)
        chosen = given + self._metrics(name for name in thresholds if name not in {m.name for m in given})
        if not chosen:
            raise ValueError("assert_rag needs min_scores (a threshold per metric), or metrics to score")
        case = Case(question, tuple(contexts), answer, ground_truth, tuple(gold_chunk_ids))
        results = self._score([case], chosen)[0]
        self.assertions += 1
        self._check(results, thresholds, {m.name: m for m in chosen})
        return results

    def assert_gate(self, tenant: str, candidate: str, **options: Any) -> GateVerdict:
        """Gate a candidate on the tenant's golden set, as `rag-eval gate` (rag_eval_pipeline.gate's options);
        a regression fails the test, an undecided verdict is reported as unmeasured."""
        from rag_eval_pipeline.api import gate

        verdict = gate(tenant, candidate, **options)
        self.assertions += 1
        if verdict.exit_code == 1:
            raise RagAssertionError("\n".join(verdict.lines()))
        if verdict.exit_code == 2:
            self._unmeasured([verdict.error_line() or verdict.verdict, *verdict.lines()])
        return verdict

    # ---- inside --------------------------------------------------------------------------------

    def _judge_and_embedder(self) -> tuple:
        if self._built is None:
            from rag_eval_pipeline.api import _judge_options, _settings
            from rag_eval_pipeline.core.judging.build import build_judge

            current = _settings()
            self._built = build_judge(
                _judge_options(self.judge, current), current.warehouse_root, current.embedding_precision
            )
        return self._built

    def _metrics(self, metrics: Iterable[Any]) -> tuple[Metric, ...]:
        from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics

        return resolve_metrics(list(metrics))

    def _score(self, cases: list[Case], chosen: tuple[Metric, ...]) -> list[dict[str, MetricResult]]:
        """{metric name: result} per case; what was scored before (one result per case and metric version)
        is read, the rest scored in one batch."""
        from rag_eval_pipeline.core.metrics.scoring import score_items
        from rag_eval_pipeline.evaluation.tabular import rows_from_records, to_items

        keys = [case.key() for case in cases]
        pending = {
            key: case for key, case in zip(keys, cases) if any(self._key(key, m) not in self._scored for m in chosen)
        }
        if pending:
            missing = tuple(m for m in chosen if any(self._key(key, m) not in self._scored for key in pending))
            items, bad = to_items(rows_from_records([case.record() for case in pending.values()]))
            if bad:
                raise ValueError(f"case {bad[0].row_number} cannot be scored: {bad[0].reason}")
            judge, embedder = self._judge_and_embedder()
            results, _ = score_items([item for _, item in items], judge, embedder, missing, self.k)
            for key, item_results in zip(pending, results):
                for metric, result in zip(missing, item_results):
                    self._scored[self._key(key, metric)] = result
        return [{m.name: self._scored[self._key(key, m)] for m in chosen} for key in keys]

    @staticmethod
    def _key(case_key: str, metric: Metric) -> tuple[str, str, str]:
        return case_key, metric.name, metric.identity

    def _check(
        self, results: Mapping[str, MetricResult], thresholds: Mapping[str, float], metrics: Mapping[str, Metric]
    ) -> None:
        from rag_eval_pipeline.core.judging.results import OK

        failed, unmeasured = [], []
        for name, result in results.items():  # a metric asked for without a threshold is never a pass unmeasured
            threshold = thresholds.get(name)
            if result.status != OK:
                wanted = f" (threshold {threshold:g})" if threshold is not None else ""
                unmeasured.append(f"{name} unmeasured{wanted}: {result.reason}")
            elif threshold is not None and result.score is not None and result.score < threshold:
                evidence = _evidence(metrics[name], result)
                failed.append(f"{name} {result.score:.3f} < {threshold:g} (judge {self.judge_name}){evidence}")
        if failed:
            raise RagAssertionError("\n".join(failed + unmeasured))
        if unmeasured:
            self._unmeasured(unmeasured)

    def _unmeasured(self, lines: list[str]) -> None:
        self.unmeasured_seen += 1
        message = "\n".join(lines)
        if self.unmeasured == "fail":
            raise RagAssertionError(message)
        try:
            import pytest
        except ImportError:  # outside a test run: still never a pass
            raise RagUnmeasured(message) from None
        pytest.skip(message)


def _thresholds(min_scores: Mapping[str, float]) -> dict[str, float]:
    thresholds = {}
    for name, value in min_scores.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            raise ValueError(f"min_scores[{name!r}] must be a number in [0, 1], got {value!r}")
        thresholds[str(name).strip()] = float(value)
    return thresholds


def _evidence(metric: Metric, result: MetricResult) -> str:
    line = metric.evidence_line(result.evidence)
    return f": {line}" if line else ""


# ---- the session's evaluator, and assert_rag on it -------------------------------------------------

_session: RagEvaluator | None = None


def session_evaluator() -> RagEvaluator:
    """The evaluator the pytest plugin set up for this session, else one with the settings' judge."""
    global _session
    if _session is None:
        _session = RagEvaluator()
    return _session


def use_evaluator(evaluator: RagEvaluator | None) -> RagEvaluator | None:
    """Make evaluator the session's (None: a default one on next use); the one it replaces."""
    global _session
    previous, _session = _session, evaluator
    return previous


def assert_rag(
    question: str,
    contexts: Sequence[str | Mapping[str, str]] = (),
    answer: str = "",
    ground_truth: str = "",
    min_scores: Mapping[str, float] | None = None,
    metrics: Iterable[Any] = (),
    gold_chunk_ids: Sequence[str] = (),
) -> dict[str, MetricResult]:
    """Score one answer and assert each metric of min_scores reaches its threshold (see the module docstring);
    metrics: more to score (a function, a criterion...) beside those min_scores names. The results by metric."""
    return session_evaluator().assert_rag(question, contexts, answer, ground_truth, min_scores, metrics, gold_chunk_ids)
