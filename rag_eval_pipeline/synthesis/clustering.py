"""Group chunks by meaning with HDBSCAN over unit-length MiniLM embeddings."""

from __future__ import annotations

import math

import hdbscan
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
        size = min_cluster_size_for(n)
        # Euclidean distance on unit vectors orders pairs exactly as cosine distance does.
        clusterer = hdbscan.HDBSCAN(min_cluster_size=size, min_samples=max(1, size // 2), metric="euclidean")
        labels = clusterer.fit_predict(vectors.astype(np.float64))
        strengths = clusterer.probabilities_
    return pd.DataFrame(
        {
            "chunk_id": chunk_ids,
            "cluster_id": labels.astype(int),
            "is_outlier": labels == OUTLIER,
            "membership": np.round(strengths.astype(float), 4),
        }
    )
