"""Verification of synthetic QA: keep grounded, well-formed, distinct items; record why others go."""

from __future__ import annotations

import re

import pandas as pd

from rag_eval_pipeline.evaluation.judge import OfflineJudge

MIN_QUESTION_WORDS = 3
MAX_QUESTION_WORDS = 80


def verify_items(items: pd.DataFrame, chunk_ids: set[str], judge: OfflineJudge) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(golden set, rejected items with a `reason` column)."""
    kept, rejected = [], []
    seen_questions: dict[str, str] = {}
    for item in items.to_dict("records"):
        reason = _rejection_reason(item, chunk_ids, judge, seen_questions)
        if reason:
            rejected.append({**item, "reason": reason})
        else:
            seen_questions[_normalise(item["question"])] = item["qa_id"]
            kept.append(item)
    columns = list(items.columns)
    return pd.DataFrame(kept, columns=columns), pd.DataFrame(rejected, columns=columns + ["reason"])


def _rejection_reason(item: dict, chunk_ids: set[str], judge: OfflineJudge, seen: dict[str, str]) -> str | None:
    n_words = len(str(item["question"]).split())
    if not MIN_QUESTION_WORDS <= n_words <= MAX_QUESTION_WORDS:
        return f"question length {n_words} words is outside {MIN_QUESTION_WORDS}-{MAX_QUESTION_WORDS}"
    unknown = [c for c in item["gold_chunk_ids"] if c not in chunk_ids]
    if not len(item["gold_chunk_ids"]) or unknown:
        return f"gold chunk ids not among the chunks: {unknown or 'none given'}"
    duplicate_of = seen.get(_normalise(item["question"]))
    if duplicate_of:
        return f"duplicate question of {duplicate_of}"
    statements = judge.statements(item["ground_truth"])
    if not statements:
        return "ground truth makes no checkable statement"
    if _normalise(item["ground_truth"]) in _normalise(item["question"]):
        return "question contains its own answer"
    unsupported = [v.statement for v in judge.verify(statements, list(item["gold_contexts"])) if not v.supported]
    if unsupported:
        return f"ground truth not supported by its gold chunks: {unsupported[0][:120]}"
    return None


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", str(text).lower()).strip()
