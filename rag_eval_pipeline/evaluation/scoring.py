"""A candidate's outputs over a golden set -> one score row per (item, metric), stamped with how it was scored.

Shared by the metric_scores asset and by the report, which re-scores a baseline's archived outputs
when the baseline was scored by another judge, k or metric set.
"""

from __future__ import annotations

import json

import pandas as pd

from rag_eval_pipeline.core.judging.metrics import EvalItem, score_items
from rag_eval_pipeline.core.judging.results import MetricResult, unmeasured

# judge (with its prompt version) and k say how a score was made: only scores made alike are compared.
SCORE_COLUMNS = ["qa_id", "metric", "score", "status", "reason", "evidence", "judge", "k", "commit"]


def score_outputs(outputs: pd.DataFrame, golden: pd.DataFrame, judge, embedder, metrics, k: int):
    """(score rows, judgements): answered items are judged in one batch; failed ones are unmeasured with why."""
    gold = golden.set_index("qa_id")
    answered = outputs[outputs["status"] == "ok"]
    items = [_eval_item(output, gold.loc[output["qa_id"]]) for output in answered.to_dict("records")]
    results, judgements = score_items(items, judge, embedder, metrics, k)
    scored = dict(zip(answered["qa_id"], results))
    rows = []
    for output in outputs.to_dict("records"):
        item_results = scored.get(output["qa_id"]) or [
            unmeasured(metric, f"candidate failed: {output['error']}") for metric in metrics
        ]
        rows += [_score_row(output, result, judge.name, k) for result in item_results]
    return pd.DataFrame(rows, columns=SCORE_COLUMNS), judgements


def _eval_item(output: dict, gold: pd.Series) -> EvalItem:
    return EvalItem(
        qa_id=output["qa_id"],
        question=output["question"],
        answer=output["answer"],
        contexts=[dict(c) for c in output["contexts"]],
        ground_truth=gold["ground_truth"],
        gold_chunk_ids=list(gold["gold_chunk_ids"]),
    )


def _score_row(output: dict, result: MetricResult, judge_name: str, k: int) -> dict:
    return {
        "qa_id": output["qa_id"], "metric": result.metric, "score": result.score, "status": result.status,
        "reason": result.reason, "evidence": json.dumps(result.evidence, default=str),
        "judge": judge_name, "k": k, "commit": output["commit"],
    }
