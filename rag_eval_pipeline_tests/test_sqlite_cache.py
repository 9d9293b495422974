"""The key -> blob SQLite store behind the embedding cache and the LLM call cache. (Tenant namespaces and
the checks on read: test_cache_tenants.py.)"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading

import numpy as np

from rag_eval_pipeline.core.embeddings import MODEL_NAME, Embedder
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache


def test_values_round_trip_and_survive_a_new_connection(tmp_path):
    path = tmp_path / "cache.sqlite"
    store = SqliteCache(path, "blobs", "shared")
    store.put("a", b"\x00\x01")
    store.put_many({f"k{i}": bytes([i % 256]) for i in range(1200)})  # more keys than one statement may bind

    again = SqliteCache(path, "blobs", "shared")

    assert again.get("a") == b"\x00\x01" and again.get("missing") is None
    found = again.get_many([f"k{i}" for i in range(1200)] + ["missing"])
    assert len(found) == 1200 and found["k1199"] == bytes([1199 % 256])
    assert len(again) == 1201
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_in_memory_store_keeps_nothing_on_disk(tmp_path):
    store = SqliteCache(None, "blobs", "shared")
    store.put("a", b"1")
    assert store.path == "" and store.get("a") == b"1" and not list(tmp_path.iterdir())


def test_threads_share_one_store():
    store = SqliteCache(None, "blobs", "shared")
    threads = [threading.Thread(target=lambda t=t: [store.put(f"{t}-{i}", b"x") for i in range(200)]) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store) == 1600


WRITER = """
import sys
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache
store = SqliteCache(sys.argv[1], "blobs", "tenant:" + sys.argv[2])
for batch in range(150):
    store.put_many({f"{sys.argv[2]}-{batch}-{i}": b"v" * 512 for i in range(20)})
    store.get_many([f"{sys.argv[2]}-{batch}-{i}" for i in range(20)])
"""


def test_processes_writing_one_file_at_once_never_fail_on_the_lock(tmp_path):
    path = tmp_path / "shared.sqlite"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n)], stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    errors = [writer.communicate(timeout=300)[1] for writer in writers]

    assert [writer.returncode for writer in writers] == [0, 0, 0, 0], errors
    assert sum(len(SqliteCache(path, "blobs", f"tenant:{n}")) for n in range(4)) == 4 * 150 * 20


def _tables(path) -> dict[str, list[str]]:
    with sqlite3.connect(path) as db:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: [row[1] for row in db.execute(f"PRAGMA table_info({name})")] for name in names}


def test_an_embedding_cache_of_an_earlier_layout_is_dropped_not_trusted(tmp_path, embedder):
    """Rows of the earlier layouts name no tenant and no input they were computed from: a wrong vector
    there must not be returned."""
    path = tmp_path / "embeddings.sqlite"
    wrong = (np.arange(384, dtype=np.float32) / 384).tobytes()
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE vectors (model TEXT, hash TEXT, vector BLOB, PRIMARY KEY (model, hash))")
        old.execute("INSERT INTO vectors VALUES (?, ?, ?)", (MODEL_NAME, sha256("cached text"), wrong))
        old.execute("CREATE TABLE embeddings (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        old.execute("INSERT INTO embeddings VALUES (?, ?)", (f"{MODEL_NAME}:{sha256('cached text')}", wrong))

    upgraded = Embedder(path)
    found = upgraded.embed(["cached text"])

    assert (upgraded.cache_hits, upgraded.cache_misses) == (0, 1)
    np.testing.assert_allclose(found[0], embedder.embed(["cached text"])[0], atol=1e-6)
    assert _tables(path) == {"embeddings": ["namespace", "key", "value"]}
    again = Embedder(path)
    again.embed(["cached text"])
    assert (again.cache_hits, again.cache_misses) == (1, 0)  # the entry written anew is trusted


def test_a_call_cache_of_an_earlier_layout_is_dropped_not_trusted(tmp_path):
    path = tmp_path / "calls.sqlite"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, content TEXT, prompt_tokens INT, completion_tokens INT)")
        old.execute("INSERT INTO calls VALUES ('k', '{\"verdict\": 1}', 120, 7)")
        old.execute("CREATE TABLE judge_calls (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        old.execute(
            """INSERT INTO judge_calls VALUES ('k2', '{"content": "{}", "prompt_tokens": 1, "completion_tokens": 2}')"""
        )

    cache = LLMCallCache(path)

    assert cache.get("k") is None and cache.get("k2") is None and len(cache) == 0
    assert _tables(path) == {"judge_calls": ["namespace", "key", "value"]}
    cache.put("k2", '"é"', 1, 2)
    assert LLMCallCache(path).get("k2") == ('"é"', 1, 2)


OPENER = """
import sys, time
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache
start = float(sys.argv[2])
for round in range(int(sys.argv[3])):
    while time.time() < start + 0.05 * round:  # both open each round's file at the same instant
        pass
    SqliteCache(f"{sys.argv[1]}-{round}.sqlite", "blobs", "tenant:x").put_many({"k": b"v"})
"""


def test_processes_creating_one_fresh_file_at_once_never_fail_on_the_lock(tmp_path):
    """Two commands starting together on an empty warehouse: the first one's switch to WAL locks the file
    for a moment, and the other's switch must wait for it rather than fail with 'database is locked'."""
    import time

    start = str(time.time() + 3)  # both spin until the same instant, imports done
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(tmp_path / "fresh"), start, "150"], stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    errors = [opener.communicate(timeout=300)[1] for opener in openers]
    assert [opener.returncode for opener in openers] == [0, 0], errors
