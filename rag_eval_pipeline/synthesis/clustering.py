"""Group chunks by meaning with scikit-learn's HDBSCAN over unit-length MiniLM embeddings.

HDBSCAN over all pairs of 20,000 chunks took minutes (its cost grows with the square of the chunk count).
The clusters depend only on the minimum spanning tree of the mutual reachability distances, and that tree
is built here from each chunk's nearest neighbours (core/neighbours.py), exactly: the same clusters in a
fraction of the time and memory (benchmarks/clustering_curve.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

OUTLIER = -1


def min_cluster_size_for(n_chunks: int) -> int:
    """Scale with the corpus: a handful of chunks per cluster for small corpora, more for large ones."""
    return max(2, min(25, round(math.sqrt(n_chunks) / 2)))


def cluster_chunks(chunk_ids: list[str], vectors: np.ndarray) -> pd.DataFrame:
    """One row per chunk: cluster id (-1 for outliers) and HDBSCAN membership strength."""
    n = len(chunk_ids)
    if n < 4:
        # Too few points for density clustering to mean anything: one group.
        labels, strengths = np.zeros(n, dtype=int), np.ones(n)
    else:
        # Imported here: scikit-learn takes a second to import, and loading the code location (every
        # `rag-eval gate`) should not pay for it.
        from sklearn.cluster import HDBSCAN

        from rag_eval_pipeline.core.neighbours import mutual_reachability_tree  # scipy, imported late too

        size = min_cluster_size_for(n)
        # scikit-learn counts a point among its own min_samples neighbours; the hdbscan package, which
        # chose these sizes, did not: the +1 keeps the same core distances, and so the same clusters.
        tree = mutual_reachability_tree(vectors, min_samples=max(1, size // 2) + 1)
        # HDBSCAN's clusters depend on the data only through this tree. Given the tree as a sparse
        # graph with min_samples=1, its core distances are each point's shortest tree edge, which leave
        # every tree edge's weight as it is.
        clusterer = HDBSCAN(
            min_cluster_size=size,
            min_samples=1,
            metric="precomputed",
            copy=False,  # pyright: ignore[reportArgumentType] - typed by its "warn" default; it takes a bool
        )
        labels = clusterer.fit_predict(tree)
        strengths = clusterer.probabilities_
    return pd.DataFrame(
        {
            "chunk_id": chunk_ids,
            "cluster_id": labels.astype(int),
            "is_outlier": labels == OUTLIER,
            "membership": np.round(strengths.astype(float), 4),
        }
    )


def cluster_labels(texts: list[str], cluster_ids: list[int], n_terms: int = 3) -> dict[int, str]:
    """Each cluster's top terms by class-based TF-IDF: frequent in the cluster, rare in the others."""
    groups: dict[int, list[str]] = {}
    for text, cluster in zip(texts, cluster_ids):
        groups.setdefault(int(cluster), []).append(text)
    if not groups:
        return {}
    from sklearn.feature_extraction.text import TfidfVectorizer  # imported late, like HDBSCAN

    documents = [" ".join(group) for group in groups.values()]
    try:
        vectorizer = TfidfVectorizer(
            stop_words="english", ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b[^\W\d_][\w'-]{2,}\b"
        )
        # Sparse: clusters x vocabulary as a dense array was half a gigabyte at 50,000 chunks.
        weights = vectorizer.fit_transform(documents).tocsr()
    except ValueError:  # nothing but stop words and numbers
        return {cluster: "" for cluster in groups}
    weights.sort_indices()  # ties keep vocabulary order, as a dense row's stable sort would
    terms = vectorizer.get_feature_names_out()
    labels = {}
    for row, cluster in enumerate(groups):
        columns = weights.indices[weights.indptr[row] : weights.indptr[row + 1]]
        values = weights.data[weights.indptr[row] : weights.indptr[row + 1]]
        top = [str(terms[columns[i]]) for i in np.argsort(-values, kind="stable") if values[i] > 0]
        labels[cluster] = ", ".join(_without_overlaps(top, n_terms))
    return labels


def _without_overlaps(terms: list[str], n: int) -> list[str]:
    """'freight' and 'freight claims' say the same thing twice: keep the first of overlapping terms."""
    chosen: list[str] = []
    for term in terms:
        words = set(term.split())
        if not any(words & set(other.split()) for other in chosen):
            chosen.append(term)
        if len(chosen) == n:
            break
    return chosen
