"""The embedding cache keeps every finished batch: an interrupted run loses at most the batch in flight."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys

import numpy as np
import pytest

from rag_eval_pipeline.core import embeddings
from rag_eval_pipeline.core.embeddings import Embedder, Progress, progress_logger

TEXTS = [f"Shipment {i} leaves the Venlo dock at {i + 6}:00 on weekdays{'.' * i}" for i in range(10)]


class _StopsAfter:
    """The model, until asked to embed past `limit` texts: then a KeyboardInterrupt, as when a run is stopped."""

    def __init__(self, model, limit: int):
        self.model, self.limit, self.done = model, limit, 0

    def encode(self, texts):
        if self.done + len(texts) > self.limit:
            raise KeyboardInterrupt
        self.done += len(texts)
        return self.model.encode(texts)


def test_an_interrupted_run_keeps_its_finished_batches_and_the_rerun_embeds_only_the_rest(
    tmp_path, monkeypatch, embedder
):
    cache = tmp_path / "embeddings.sqlite"
    stops = _StopsAfter(embeddings.shared_model(), limit=8)
    monkeypatch.setattr(embeddings, "shared_model", lambda precision: stops)
    with pytest.raises(KeyboardInterrupt):
        Embedder(cache, batch_size=4).embed(TEXTS)
    monkeypatch.undo()

    rerun = Embedder(cache, batch_size=4)  # a new connection sees only what was committed
    vectors = rerun.embed(TEXTS)

    assert (rerun.cache_hits, rerun.cache_misses) == (8, 2)  # two whole batches survived the interruption
    np.testing.assert_allclose(vectors, embedder.embed(TEXTS), atol=1e-5)


KILLED_CHILD = """
import os, signal, sys
from rag_eval_pipeline.core.embeddings import Embedder

def die_after_two_batches(progress):
    if progress.batches_done == 2:
        os.kill(os.getpid(), signal.SIGKILL)

Embedder(sys.argv[1], batch_size=4).embed(sys.argv[2:], progress=die_after_two_batches)
"""


def test_a_process_killed_mid_embedding_leaves_its_finished_batches_in_the_cache(tmp_path):
    cache = tmp_path / "embeddings.sqlite"
    child = subprocess.run(
        [sys.executable, "-c", KILLED_CHILD, str(cache), *TEXTS], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    rerun = Embedder(cache, batch_size=4)
    rerun.embed(TEXTS)

    assert (rerun.cache_hits, rerun.cache_misses) == (8, 2)


def test_progress_is_reported_after_every_batch_and_only_for_new_texts(tmp_path):
    embedder = Embedder(tmp_path / "embeddings.sqlite", batch_size=4)
    embedder.embed(TEXTS[:3])
    seen: list[Progress] = []

    embedder.embed(TEXTS, progress=seen.append)

    assert [(p.batches_done, p.batches, p.texts_done, p.texts) for p in seen] == [(1, 2, 4, 7), (2, 2, 7, 7)]
    assert all(p.texts_per_s > 0 for p in seen)
    embedder.embed(TEXTS, progress=seen.append)
    assert len(seen) == 2  # everything cached: nothing to report


def test_progress_log_is_throttled_but_always_reports_the_last_batch(caplog):
    log = logging.getLogger("test.embedding.progress")
    report = progress_logger(log, every_s=10)

    with caplog.at_level(logging.INFO, logger=log.name):
        for elapsed, done in ((1, 1), (5, 2), (12, 3), (15, 4), (16, 5)):
            report(Progress(done, 5, done * 16, 80, elapsed))

    assert [r.getMessage() for r in caplog.records] == [
        "embedded 16/80 new texts, batch 1/5, 16.0 texts/s, 4 s left",
        "embedded 48/80 new texts, batch 3/5, 4.0 texts/s, 8 s left",
        "embedded 80/80 new texts, batch 5/5, 5.0 texts/s, 0 s left",
    ]
