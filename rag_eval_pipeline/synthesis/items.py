"""What the synthesis track passes between its steps: generation tasks, QA items, and failures.

The planner turns test nodes into `GenerationTask`s (a question type plus the chunks to write it
from); a generator (offline templates or an LLM) turns each task into a `QAItem` or a
`GenerationFailure` with its reason; verification keeps or rejects items.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Protocol

import pandas as pd

from rag_eval_pipeline.core.text import sha256

SIMPLE, REASONING, MULTI_CONTEXT, UNANSWERABLE = "simple", "reasoning", "multi_context", "unanswerable"
QUESTION_TYPES = (SIMPLE, REASONING, MULTI_CONTEXT, UNANSWERABLE)

# The expected answer of an unanswerable question: a candidate should decline, not guess. Worded so the
# judges' noncommittal detection recognises it.
REFUSAL = "There is not enough information in the documents to answer this question."


@dataclass(frozen=True)
class SourceChunk:
    chunk_id: str
    doc_id: str
    title: str  # the document's title
    heading: str  # the section heading of the chunk, "" if none
    text: str


@dataclass(frozen=True)
class GenerationTask:
    """One question to write: its type and the chunks to write it from.

    simple and reasoning: one chunk; multi_context: two or more chunks; unanswerable: the chunks only
    set the topic (the question must not be answerable from them or from the corpus).
    """

    question_type: str
    chunks: tuple[SourceChunk, ...]
    cluster_id: int
    cluster_label: str = ""  # the cluster's top terms

    @property
    def task_id(self) -> str:
        return sha256(f"{self.question_type}|{','.join(c.chunk_id for c in self.chunks)}")[:16]


@dataclass(frozen=True)
class QAItem:
    qa_id: str
    question: str
    ground_truth: str
    gold_chunk_ids: list[str]  # empty for unanswerable questions
    gold_contexts: list[str]
    question_type: str
    source_cluster: int
    source_chunk_ids: list[str]  # the chunks the generator saw
    generator: str  # "offline-template" or "llm:<model>"
    prompt_version: str
    template: str = ""  # the offline template used, "" for an LLM
    topic: str = ""  # the noun phrase a template asked about, "" when unknown (an LLM's question)


@dataclass(frozen=True)
class GenerationFailure:
    """A task the generator could not turn into an item (empty or malformed output, nothing to ask)."""

    task: GenerationTask
    generator: str
    reason: str


Outcome = QAItem | GenerationFailure


class Generator(Protocol):
    name: str  # recorded on every item, e.g. "offline-template" or "llm:<model>"
    prompt_version: str

    @property
    def supported_types(self) -> tuple[str, ...]:  # the question types it can honestly write
        ...

    def generate(self, tasks: list[GenerationTask]) -> list[Outcome]: ...


def make_item(
    task: GenerationTask,
    question: str,
    ground_truth: str,
    generator: str,
    prompt_version: str,
    template: str = "",
    topic: str = "",
) -> QAItem:
    """An item for a task. The qa_id is a content hash, so the same item gets the same id in every run."""
    gold = [] if task.question_type == UNANSWERABLE else list(task.chunks)
    question, ground_truth = question.strip(), ground_truth.strip()
    return QAItem(
        qa_id=sha256(f"{task.question_type}|{','.join(c.chunk_id for c in gold)}|{normalise(question)}")[:16],
        question=question,
        ground_truth=ground_truth,
        gold_chunk_ids=[c.chunk_id for c in gold],
        gold_contexts=[c.text for c in gold],
        question_type=task.question_type,
        source_cluster=task.cluster_id,
        source_chunk_ids=[c.chunk_id for c in task.chunks],
        generator=generator,
        prompt_version=prompt_version,
        template=template,
        topic=topic,
    )


ITEM_COLUMNS = list(QAItem.__dataclass_fields__)
# Verification adds: round_trip_rank = rank (1..k) of the first gold chunk when the reference retriever
# is asked the question, 0 when no gold chunk is in its top k, -1 for items without gold chunks;
# grounded = every ground-truth statement supported by the gold chunks (True for unanswerable items
# whose question the corpus does not answer); quality_score = the quality stage's score in [0, 1], for a
# reviewer to sort by (synthesis/quality.py).
GOLDEN_COLUMNS = ITEM_COLUMNS + ["round_trip_rank", "grounded", "quality_score"]
REJECTED_COLUMNS = ITEM_COLUMNS + ["stage", "reason"]


def items_frame(items: list[QAItem]) -> pd.DataFrame:
    return pd.DataFrame([asdict(i) for i in items], columns=ITEM_COLUMNS)


def failures_frame(failures: list[GenerationFailure]) -> pd.DataFrame:
    """Failed tasks as rows of the rejected table: item columns where known, the reason always."""
    rows = [
        {
            "qa_id": f"task-{f.task.task_id}",
            "question": "",
            "ground_truth": "",
            "gold_chunk_ids": [],
            "gold_contexts": [],
            "question_type": f.task.question_type,
            "source_cluster": f.task.cluster_id,
            "source_chunk_ids": [c.chunk_id for c in f.task.chunks],
            "generator": f.generator,
            "prompt_version": "",
            "template": "",
            "topic": "",
            "stage": "generation",
            "reason": f.reason,
        }
        for f in failures
    ]
    return pd.DataFrame(rows, columns=REJECTED_COLUMNS)


def normalise(text: str) -> str:
    return re.sub(r"[^\w]+", " ", str(text).lower()).strip()
