"""Test nodes: the chunks questions are written from, chosen so the set represents the whole corpus.

A chunk qualifies when it holds at least one factual sentence. Qualifying chunks are ranked so that
the first picks cover every cluster (outliers are a group of their own) and then every document,
and the rest take turns across clusters by score: information density times cluster centrality.
Generation walks this ranking, so the set does not come from the corpus's first pages.
"""

from __future__ import annotations

import re
from collections import deque

import pandas as pd

from rag_eval_pipeline.core.text import content_words, count_tokens, is_table_like, numbers, split_sentences
from rag_eval_pipeline.synthesis.phrases import MAX_WORD_CHARS

_NAME = re.compile(r"(?<![.!?] )(?<!^)\b[A-Z][a-z]+")


def factual_sentences(text: str) -> list[str]:
    """Declarative sentences long enough to carry a checkable fact."""
    return [s for s in split_sentences(text) if _is_factual(s)]


def _is_factual(sentence: str) -> bool:
    """Not table debris ("Manufacturing 5 , 300 13 .") nor text whose spaces PDF extraction lost."""
    words = sentence.split()
    return (
        8 <= len(words) <= 40
        and sentence[-1] == "."
        and len(content_words(sentence)) >= 4
        and not is_table_like(sentence)
        and max(len(w) for w in words) <= MAX_WORD_CHARS
    )


def information_score(text: str) -> float:
    """Distinct content words per token, plus a bonus for numbers, names and factual sentences. 0: no facts."""
    facts = factual_sentences(text)
    if not facts:
        return 0.0
    density = len(set(content_words(text))) / max(count_tokens(text), 1)
    checkable = min(len(numbers(text)) + len(_NAME.findall(text)), 10)
    return round(density + 0.05 * checkable + 0.05 * min(len(facts), 5), 4)


def rank_test_nodes(chunks: pd.DataFrame, clusters: pd.DataFrame) -> pd.DataFrame:
    """Per chunk: `information`, `centrality` and `test_node_rank` (1 = first pick, 0 = not a test node)."""
    table = chunks[["chunk_id", "doc_id", "text"]].merge(
        clusters[["chunk_id", "cluster_id", "membership"]], on="chunk_id"
    )
    table["information"] = table["text"].map(information_score)
    if "kind" in chunks:  # ingestion marks runs of table rows: no template may read them as prose
        is_table = table["chunk_id"].map(dict(zip(chunks["chunk_id"], chunks["kind"] == "table")))
        table.loc[is_table.fillna(False).astype(bool), "information"] = 0.0
    # HDBSCAN gives outliers membership 0; as a group of their own they rank by information alone.
    table["centrality"] = table["membership"].where(table["cluster_id"] >= 0, 1.0)
    table["node_score"] = table["information"] * (0.5 + 0.5 * table["centrality"])
    eligible = table[table["information"] > 0].sort_values(["node_score", "chunk_id"], ascending=[False, True])
    order = _coverage_order(eligible)
    rank = {chunk_id: i + 1 for i, chunk_id in enumerate(order)}
    table["test_node_rank"] = table["chunk_id"].map(rank).fillna(0).astype(int)
    return table[["chunk_id", "information", "centrality", "test_node_rank"]]


def _coverage_order(ranked: pd.DataFrame) -> list[str]:
    """Every cluster's best chunk, then every uncovered document's best, then turns across clusters."""
    queues = {
        cluster: deque(group["chunk_id"])
        for cluster, group in sorted(ranked.groupby("cluster_id"), key=lambda g: (-len(g[1]), g[0]))
    }
    doc_of = dict(zip(ranked["chunk_id"], ranked["doc_id"]))
    order = [queue.popleft() for queue in queues.values()]
    covered = {doc_of[c] for c in order}
    for chunk_id in ranked["chunk_id"]:
        if doc_of[chunk_id] not in covered:
            order.append(chunk_id)
            covered.add(doc_of[chunk_id])
    taken = set(order)  # picked ahead of their cluster's turn: skipped when that turn comes
    while any(queues.values()):
        for queue in queues.values():
            while queue and queue[0] in taken:
                queue.popleft()
        turn = [queue.popleft() for queue in queues.values() if queue]
        order += turn
        taken.update(turn)
    return order
