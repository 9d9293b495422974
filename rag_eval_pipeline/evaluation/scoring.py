"""Scoring items into rows: one row per (item, metric), the one path behind every score table.

metric_rows turns the metric results of scored items into rows. score_outputs uses it for the
metric_scores asset and for the report, which re-scores a baseline's archived outputs when the
baseline was scored by another judge, k or metric set; `rag-eval evaluate` uses it through
tabular.results_frame, which lays the same rows out one input row wide.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import CANDIDATE_FAILED, OK, SCORE_COLUMNS, MetricResult, unmeasured
from rag_eval_pipeline.core.metrics.registry import names, scoring_name
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics


def metric_rows(scored: Iterable[tuple[dict, list[MetricResult]]]) -> list[dict]:
    """One row per metric result: the item's own fields (its id...), then metric, score, status,
    reason and the evidence as JSON. An item with no result has no row."""
    return [
        {
            **fields,
            "metric": result.metric,
            "score": result.score,
            "status": result.status,
            "reason": result.reason,
            "evidence": json.dumps(result.evidence, default=str),
        }
        for fields, results in scored
        for result in results
    ]


def score_outputs(outputs: pd.DataFrame, golden: pd.DataFrame, judge, embedder, metrics, k: int):
    """(score rows, judgements): answered items are judged in one batch; failed ones are unmeasured with why.
    metrics: names (a team's metrics are loaded) or Metric objects."""
    metrics = resolve_metrics(metrics)
    gold = golden.set_index("qa_id")
    records = outputs.to_dict("records")
    answered = [i for i, output in enumerate(records) if output["status"] == OK]
    items = [_eval_item(records[i], gold.loc[records[i]["qa_id"]]) for i in answered]
    results, judgements = score_items(items, judge, embedder, metrics, k)
    scored = dict(zip(answered, results))
    traces = dict(zip(answered, (judgement.trace for judgement in judgements)))
    judge_name = scoring_name(judge.name, metrics)
    rows = metric_rows(
        (
            {
                "qa_id": output["qa_id"],
                "judge": judge_name,
                "k": k,
                "commit": output["commit"],
                **dict(zip(("trace_id", "span_id"), traces.get(i) or _candidate_trace(output))),
            },
            scored.get(i) or [unmeasured(metric, CANDIDATE_FAILED + str(output["error"])) for metric in names(metrics)],
        )
        for i, output in enumerate(records)
    )
    return pd.DataFrame(rows, columns=SCORE_COLUMNS), judgements


def _candidate_trace(output: dict) -> tuple[str, str]:
    """An item the candidate failed has no judge span: its rows point at the candidate's span, where the
    failure is recorded. Outputs written before traces carry no ids, or NaN where frames were joined."""
    trace_id, span_id = output.get("trace_id"), output.get("span_id")
    return (trace_id if isinstance(trace_id, str) else "", span_id if isinstance(span_id, str) else "")


def _eval_item(output: dict, gold: pd.Series) -> EvalItem:
    return EvalItem(
        qa_id=output["qa_id"],
        question=output["question"],
        answer=output["answer"],
        contexts=[dict(c) for c in output["contexts"]],
        ground_truth=gold["ground_truth"],
        gold_chunk_ids=list(gold["gold_chunk_ids"]),
    )
