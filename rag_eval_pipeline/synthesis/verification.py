"""Verification of synthetic QA: keep grounded, well-formed, distinct items; record why the others go.

Checks run cheapest first; every item gets at most one rejection, with its stage and reason:
  form        question and answer lengths, a refusal for unanswerable items
  quality     a well-formed question about something that stands on its own (synthesis/quality.py);
              kept items get its quality score
  gold_ids    answerable items name gold chunks, and they exist
  leak        the question already states its whole answer
  grounding   every ground-truth statement is supported by the gold chunks (the configured judge);
              a multi-context answer uses every one of its chunks
  answerable  an "unanswerable" question that a retrieved chunk answers word for word
  duplicate   a question too close (embedding cosine) to one already kept
  retrieval   the reference retriever misses every gold chunk in its top k (only when configured)
Every kept item records its round-trip rank: where the reference retriever puts its first gold chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judge import Judge
from rag_eval_pipeline.core.judging.judgement import GROUND_TRUTH_SUPPORT, Failure
from rag_eval_pipeline.core.retrieval import ReferenceCandidate
from rag_eval_pipeline.core.text import content_words, numbers
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    MULTI_CONTEXT,
    REFUSAL,
    REJECTED_COLUMNS,
    UNANSWERABLE,
    normalise,
)
from rag_eval_pipeline.synthesis.phrases import normalise_heading
from rag_eval_pipeline.synthesis.quality import QualityContext, assess


@dataclass(frozen=True)
class VerificationSettings:
    round_trip_k: int = 5
    drop_on_retrieval_miss: bool = False
    near_duplicate_cosine: float = 0.95
    min_question_words: int = 3
    max_question_words: int = 80
    max_answer_words: int = 150


@dataclass
class _Rejection:
    stage: str
    reason: str


def verify_items(
    items: pd.DataFrame,
    chunks: pd.DataFrame,
    judge: Judge,
    embedder: Embedder,
    settings: VerificationSettings = VerificationSettings(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(golden set with GOLDEN_COLUMNS, rejected items with REJECTED_COLUMNS)."""
    records, repeats = _without_repeats(items.to_dict("records"))
    verdicts: dict[str, _Rejection] = {}
    chunk_texts = dict(zip(chunks["chunk_id"], chunks["text"]))
    sections = frozenset(normalise_heading(h) for h in chunks["heading"]) if "heading" in chunks else frozenset()
    scores: dict[str, float] = {}
    for item in records:
        rejection = (
            _form(item, settings)
            or _quality(item, chunk_texts, sections, scores)
            or _gold_ids(item, chunk_texts)
            or _leak(item)
        )
        if rejection:
            verdicts[item["qa_id"]] = rejection
    _grounding(_pending(records, verdicts, answerable=True), judge, verdicts)
    retriever = ReferenceCandidate(
        chunks["chunk_id"].tolist(), chunks["text"].tolist(), embedder, settings.round_trip_k
    )
    _answerable(_pending(records, verdicts, answerable=False), retriever, verdicts)
    _near_duplicates(_pending(records, verdicts), embedder, settings.near_duplicate_cosine, verdicts)
    ranks = _round_trip_ranks(_pending(records, verdicts), retriever)
    if settings.drop_on_retrieval_miss:
        for qa_id in [q for q, rank in ranks.items() if rank == 0]:
            verdicts[qa_id] = _Rejection(
                "retrieval", f"no gold chunk in the reference retriever's top {settings.round_trip_k}"
            )
    golden, rejected = _split(records, verdicts, ranks, scores)
    return golden, pd.concat(
        [rejected, pd.DataFrame(repeats, columns=REJECTED_COLUMNS)], ignore_index=True
    ) if repeats else rejected


def _without_repeats(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """The same qa_id twice is the same content written from two tasks: keep the first."""
    seen, unique, repeats = set(), [], []
    for record in records:
        if record["qa_id"] in seen:
            repeats.append(
                {**record, "stage": "duplicate", "reason": f"same question and gold chunks as {record['qa_id']}"}
            )
        else:
            seen.add(record["qa_id"])
            unique.append(record)
    return unique, repeats


def _pending(records: list[dict], verdicts: dict, answerable: bool | None = None) -> list[dict]:
    """Items not rejected yet; answerable=True/False selects by type."""
    return [
        r
        for r in records
        if r["qa_id"] not in verdicts and (answerable is None or (r["question_type"] != UNANSWERABLE) == answerable)
    ]


def _form(item: dict, settings: VerificationSettings) -> _Rejection | None:
    n_question = len(str(item["question"]).split())
    if not settings.min_question_words <= n_question <= settings.max_question_words:
        return _Rejection(
            "form",
            f"question has {n_question} words, outside {settings.min_question_words}-{settings.max_question_words}",
        )
    n_answer = len(str(item["ground_truth"]).split())
    if not 1 <= n_answer <= settings.max_answer_words:
        return _Rejection("form", f"ground truth has {n_answer} words, outside 1-{settings.max_answer_words}")
    if item["question_type"] == UNANSWERABLE and item["ground_truth"] != REFUSAL:
        return _Rejection("form", "an unanswerable item must expect the refusal as its answer")
    return None


def _quality(
    item: dict, chunk_texts: dict[str, str], sections: frozenset[str], scores: dict[str, float]
) -> _Rejection | None:
    """The quality stage; the score of a question it keeps goes to `scores`."""
    source = " ".join(chunk_texts.get(c, "") for c in item["source_chunk_ids"])
    verdict = assess(item["question"], item["question_type"], item.get("topic") or "", QualityContext(source, sections))
    if verdict.problem:
        return _Rejection("quality", verdict.problem)
    scores[item["qa_id"]] = verdict.score
    return None


def _gold_ids(item: dict, chunk_texts: dict[str, str]) -> _Rejection | None:
    gold = list(item["gold_chunk_ids"])
    if item["question_type"] == UNANSWERABLE:
        return _Rejection("gold_ids", "an unanswerable item cannot have gold chunks") if gold else None
    unknown = [c for c in gold if c not in chunk_texts]
    if not gold or unknown:
        return _Rejection("gold_ids", f"gold chunk ids not among the chunks: {unknown or 'none given'}")
    # Grounding reads the contexts the item carries: they must be what its gold chunks say.
    if list(item["gold_contexts"]) != [chunk_texts[c] for c in gold]:
        return _Rejection("gold_ids", "gold contexts are not the texts of the gold chunks")
    return None


def _leak(item: dict) -> _Rejection | None:
    if item["question_type"] == UNANSWERABLE:
        return None
    question, answer = str(item["question"]), str(item["ground_truth"])
    new = (set(content_words(answer)) | numbers(answer)) - (set(content_words(question)) | numbers(question))
    if normalise(answer) in normalise(question) or not new:
        return _Rejection("leak", "the question already states its whole answer")
    return None


def _grounding(records: list[dict], judge: Judge, verdicts: dict[str, _Rejection]) -> None:
    """One batched judge call over the items: each ground-truth statement supported by the gold chunks."""
    if not records:
        return
    items = [
        EvalItem(
            r["qa_id"],
            r["question"],
            "",
            [{"id": c, "text": t} for c, t in zip(r["gold_chunk_ids"], r["gold_contexts"])],
            r["ground_truth"],
            list(r["gold_chunk_ids"]),
        )
        for r in records
    ]
    for record, judgement in zip(records, judge.judge_many(items, {GROUND_TRUTH_SUPPORT})):
        rejection = _support_rejection(judgement.ground_truth_support) or _unused_chunk(record)
        if rejection:
            verdicts[record["qa_id"]] = rejection


def _support_rejection(support) -> _Rejection | None:
    if isinstance(support, Failure) or support is None:
        return _Rejection(
            "grounding", f"the judge could not check the ground truth: {getattr(support, 'reason', 'no verdict')}"
        )
    if not support:
        return _Rejection("grounding", "the ground truth makes no checkable statement")
    unsupported = [v.statement for v in support if not v.verdict]
    if unsupported:
        return _Rejection("grounding", f"ground truth not supported by its gold chunks: {unsupported[0][:160]}")
    return None


def _unused_chunk(record: dict) -> _Rejection | None:
    """A multi-context answer must draw on every gold chunk, beyond what the question itself says."""
    if record["question_type"] != MULTI_CONTEXT:
        return None
    answer_words = set(content_words(record["ground_truth"])) - set(content_words(record["question"]))
    for chunk_id, text in zip(record["gold_chunk_ids"], record["gold_contexts"]):
        if not answer_words & set(content_words(text)):
            return _Rejection("grounding", f"the ground truth uses nothing from gold chunk {chunk_id}")
    return None


def _answerable(records: list[dict], retriever: ReferenceCandidate, verdicts: dict[str, _Rejection]) -> None:
    """Offline and weak: an 'unanswerable' question whose every content word one retrieved chunk contains."""
    for record, top in zip(records, retriever.retrieve_many([r["question"] for r in records])):
        asked = set(content_words(record["question"]))
        for index in top:
            if asked <= set(content_words(retriever.chunk_texts[index])):
                verdicts[record["qa_id"]] = _Rejection(
                    "answerable", f"chunk {retriever.chunk_ids[index]} may answer it"
                )
                break


def _near_duplicates(
    records: list[dict], embedder: Embedder, threshold: float, verdicts: dict[str, _Rejection]
) -> None:
    if not records:
        return
    vectors = embedder.embed([r["question"] for r in records])
    kept: list[int] = []
    for i, record in enumerate(records):
        if kept:
            cosines = vectors[kept] @ vectors[i]
            nearest = int(np.argmax(cosines))
            if cosines[nearest] >= threshold:
                twin = records[kept[nearest]]["qa_id"]
                verdicts[record["qa_id"]] = _Rejection(
                    "duplicate", f"near-duplicate of {twin} (cosine {cosines[nearest]:.3f})"
                )
                continue
        kept.append(i)


def _round_trip_ranks(records: list[dict], retriever: ReferenceCandidate) -> dict[str, int]:
    """1..k: rank of the first gold chunk the retriever returns; 0: none in the top k; -1: no gold chunk."""
    answerable = [r for r in records if len(r["gold_chunk_ids"])]
    ranks = {r["qa_id"]: -1 for r in records}
    for record, top in zip(answerable, retriever.retrieve_many([r["question"] for r in answerable])):
        gold = set(record["gold_chunk_ids"])
        ranks[record["qa_id"]] = next((i + 1 for i, index in enumerate(top) if retriever.chunk_ids[index] in gold), 0)
    return ranks


def _split(
    records: list[dict], verdicts: dict[str, _Rejection], ranks: dict[str, int], scores: dict[str, float]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    kept, rejected = [], []
    for record in records:
        verdict = verdicts.get(record["qa_id"])
        if verdict:
            rejected.append({**record, "stage": verdict.stage, "reason": verdict.reason})
        else:
            kept.append(
                {
                    **record,
                    "round_trip_rank": ranks[record["qa_id"]],
                    "grounded": True,
                    "quality_score": scores[record["qa_id"]],
                }
            )
    return pd.DataFrame(kept, columns=GOLDEN_COLUMNS), pd.DataFrame(rejected, columns=REJECTED_COLUMNS)
