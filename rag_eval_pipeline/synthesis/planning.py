"""Planning: how many questions of each type, and which chunks each candidate question is written from."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from rag_eval_pipeline.core.defaults import DEFAULT_MIX  # noqa: F401 (re-exported; the CLI's help shows it)
from rag_eval_pipeline.core.text import content_words
from rag_eval_pipeline.synthesis.items import (
    MULTI_CONTEXT,
    QUESTION_TYPES,
    GenerationTask,
    SourceChunk,
)
from rag_eval_pipeline.synthesis.test_nodes import factual_sentences


@dataclass(frozen=True)
class TypePlan:
    question_type: str
    requested: int  # from the mix
    planned: int  # after moving what the generator cannot write to the types it can
    note: str = ""


def plan_counts(n: int, mix: dict[str, float], supported: tuple[str, ...]) -> list[TypePlan]:
    """Split n items by the mix; a type the generator cannot write gives its share to the others."""
    _check_mix(n, mix)
    requested = _split(n, mix)
    writable = {t: w for t, w in mix.items() if t in supported and w > 0}
    planned = _split(n, writable) if writable else {}
    return [
        TypePlan(
            t,
            requested.get(t, 0),
            planned.get(t, 0),
            ""
            if t in supported or not requested.get(t)
            else "this generator cannot write this type; its share went to the others",
        )
        for t in QUESTION_TYPES
        if t in mix
    ]


def _check_mix(n: int, mix: dict[str, float]) -> None:
    if n < 1:
        raise ValueError(f"the number of items must be at least 1, got {n}")
    unknown = set(mix) - set(QUESTION_TYPES)
    if unknown:
        raise ValueError(f"unknown question types {sorted(unknown)}; known: {', '.join(QUESTION_TYPES)}")
    if any(w < 0 for w in mix.values()) or not sum(mix.values()) > 0:
        raise ValueError(f"the type mix needs non-negative weights with a positive sum, got {mix}")


def _split(n: int, weights: dict[str, float]) -> dict[str, int]:
    """Largest-remainder rounding, so the counts add up to n exactly."""
    total = sum(weights.values())
    exact = {t: n * w / total for t, w in weights.items()}
    counts = {t: int(v) for t, v in exact.items()}
    by_remainder = sorted(weights, key=lambda t: (-(exact[t] - counts[t]), QUESTION_TYPES.index(t)))
    for t in by_remainder[: n - sum(counts.values())]:
        counts[t] += 1
    return counts


def candidate_tasks(
    chunks: pd.DataFrame, nodes: pd.DataFrame, titles: dict[str, str], plans: list[TypePlan]
) -> dict[str, list[GenerationTask]]:
    """Per type, every task it could be written from, best first.

    `nodes` has chunk_id, cluster_id, cluster_label and test_node_rank (0: not a test node). Each type
    starts at a different point of the ranking, so the types do not all draw on the same few chunks.
    """
    table = chunks.merge(nodes, on="chunk_id")
    ranked = table[table["test_node_rank"] > 0].sort_values("test_node_rank").to_dict("records")
    sources = {row["chunk_id"]: _source(row, titles) for row in table.to_dict("records")}
    tasks: dict[str, list[GenerationTask]] = {}
    offset = 0
    for plan in plans:
        rotated = ranked[offset % len(ranked) :] + ranked[: offset % len(ranked)] if ranked else []
        offset += plan.planned
        if plan.question_type == MULTI_CONTEXT:
            tasks[MULTI_CONTEXT] = _pair_tasks(rotated, table, sources)
        else:
            tasks[plan.question_type] = [_task(plan.question_type, [sources[r["chunk_id"]]], r) for r in rotated]
    return tasks


def _source(row: dict, titles: dict[str, str]) -> SourceChunk:
    return SourceChunk(
        row["chunk_id"],
        row["doc_id"],
        str(titles.get(row["doc_id"], row["doc_id"])),
        row.get("heading") or "",
        row["text"],
    )


def _task(question_type: str, chunks: list[SourceChunk], node: dict) -> GenerationTask:
    return GenerationTask(question_type, tuple(chunks), int(node["cluster_id"]), node.get("cluster_label") or "")


def _pair_tasks(ranked: list[dict], table: pd.DataFrame, sources: dict[str, SourceChunk]) -> list[GenerationTask]:
    """Each test node with the chunk of its cluster it shares most key terms with, another document first."""
    members = {cluster: group.to_dict("records") for cluster, group in table.groupby("cluster_id")}
    terms = {row["chunk_id"]: key_terms(row["text"]) for row in table.to_dict("records")}
    tasks, seen = [], set()
    for node in ranked:
        partner = _partner(node, members[node["cluster_id"]], terms)
        if partner is None:
            continue
        pair = frozenset((node["chunk_id"], partner["chunk_id"]))
        if pair not in seen:
            seen.add(pair)
            tasks.append(_task(MULTI_CONTEXT, [sources[node["chunk_id"]], sources[partner["chunk_id"]]], node))
    return tasks


def _partner(node: dict, members: list[dict], terms: dict[str, set[str]]) -> dict | None:
    def preference(other: dict):
        shared = len(terms[node["chunk_id"]] & terms[other["chunk_id"]])
        return (other["doc_id"] != node["doc_id"], shared, other["chunk_id"])

    others = [
        m
        for m in members
        if m["chunk_id"] != node["chunk_id"]
        and terms[node["chunk_id"]] & terms[m["chunk_id"]]
        # Neighbours share their overlap text: a pair of them is one passage, not two contexts.
        and not (m["doc_id"] == node["doc_id"] and abs(m["position"] - node["position"]) <= 1)
    ]
    return max(others, key=preference) if others else None


def key_terms(text: str) -> set[str]:
    """Two-word terms of the chunk's factual sentences ('rate limit', 'retention policy'): one shared word
    ('status', 'limit') links unrelated facts too often to make a multi-context question."""
    return {term for sentence in factual_sentences(text) for term in topic_terms(sentence)}


def topic_terms(sentence: str) -> list[str]:
    """Adjacent content-word pairs, stemmed: 'Customer Shipment Data' -> 'customer shipment', 'shipment data'."""
    words = re.findall(r"[\w'-]+", sentence)
    stems = [content_words(w) for w in words]
    return [
        f"{a[0]} {b[0]}"
        for a, b in zip(stems, stems[1:])
        if len(a) == 1 and len(b) == 1 and not (a[0].isdigit() or b[0].isdigit())
    ]
