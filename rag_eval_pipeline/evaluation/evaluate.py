"""Scoring a table of (question, contexts, answer, ground truth) rows: the one path behind
`rag-eval evaluate` and the Python API's `evaluate()` / `aevaluate()`.

Rows are read by evaluation/tabular.py (RAGAS column names accepted); a row that cannot be scored is kept
with status 'invalid' and its reason. Items are scored in batches, each one judge batch (the LLM judge's
calls run concurrently within it), so a long run reports progress. The result is laid out one input row
wide, as `rag-eval evaluate` writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from rag_eval_pipeline.core.judging.results import OK
from rag_eval_pipeline.core.metrics.metric import Metric
from rag_eval_pipeline.core.metrics.registry import names, scoring_name
from rag_eval_pipeline.core.metrics.scoring import ascore_items, score_items
from rag_eval_pipeline.evaluation.tabular import BadRow, InputRow, results_frame, summary_table, to_items

BATCH_SIZE = 32  # rows scored between two progress updates
UNMEASURED_PREFIX = "unmeasured: "


@dataclass(frozen=True)
class EvaluationResult:
    """The scores of every input row: `to_pandas()` (a row per input, a column per metric and its status),
    `summary()` (per metric: mean over the measured rows, how many were measured) and
    `unmeasured_reasons()` (per metric and reason, how many rows)."""

    frame: pd.DataFrame
    metrics: tuple[str, ...]
    judge: str
    invalid: tuple[BadRow, ...] = ()

    def to_pandas(self) -> pd.DataFrame:
        return self.frame.copy()

    def summary(self) -> pd.DataFrame:
        rows = []
        for metric in self.metrics:
            measured = self.frame.loc[self.frame[f"{metric}_status"] == OK, metric]
            rows.append(
                {
                    "metric": metric,
                    "mean": float(measured.mean()) if len(measured) else None,  # None, never NaN: nothing measured
                    "measured": len(measured),
                    "rows": len(self.frame),
                }
            )
        return pd.DataFrame(rows, columns=["metric", "mean", "measured", "rows"]).astype({"mean": "Float64"})

    def unmeasured_reasons(self) -> pd.DataFrame:
        rows = [
            {"metric": metric, "reason": str(status).removeprefix(UNMEASURED_PREFIX), "rows": int(count)}
            for metric in self.metrics
            for status, count in self.frame[f"{metric}_status"].value_counts(sort=False).items()
            if status != OK
        ]
        return pd.DataFrame(rows, columns=["metric", "reason", "rows"])

    def table(self) -> str:
        """The summary as `rag-eval evaluate` prints it."""
        return summary_table(self.frame, self.metrics)

    def __repr__(self) -> str:
        return f"EvaluationResult(judge={self.judge!r}, rows={len(self.frame)})\n{self.table()}"


Progress = Callable[[int], object]  # told how many more rows were scored


def evaluate_rows(
    rows: list[InputRow], judge, embedder, metrics: Sequence[Metric], k: int, progress: Progress | None = None
) -> EvaluationResult:
    items, bad_rows = to_items(rows)
    results = []
    for batch in _batches(items):
        batch_results, _ = score_items(batch, judge, embedder, metrics, k)
        results += batch_results
        if progress:
            progress(len(batch))
    return _result(rows, items, results, bad_rows, judge, metrics)


async def aevaluate_rows(
    rows: list[InputRow], judge, embedder, metrics: Sequence[Metric], k: int, progress: Progress | None = None
) -> EvaluationResult:
    """evaluate_rows on the caller's event loop."""
    items, bad_rows = to_items(rows)
    results = []
    for batch in _batches(items):
        batch_results, _ = await ascore_items(batch, judge, embedder, metrics, k)
        results += batch_results
        if progress:
            progress(len(batch))
    return _result(rows, items, results, bad_rows, judge, metrics)


def _batches(items):
    for start in range(0, len(items), BATCH_SIZE):
        yield [item for _, item in items[start : start + BATCH_SIZE]]


def _result(rows, items, results, bad_rows, judge, metrics: Sequence[Metric]) -> EvaluationResult:
    chosen = names(metrics)
    frame = results_frame(rows, items, results, bad_rows, chosen)
    return EvaluationResult(frame, chosen, scoring_name(judge.name, metrics), tuple(bad_rows))
