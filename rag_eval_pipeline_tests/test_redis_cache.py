"""The shared Redis store behind the caches in production: it behaves as the SQLite store, its
entries are seen by every process, and the judge-call and embedding caches use it given a redis:// URL.
(Tenant namespaces and the checks on read: test_cache_tenants.py.)

Needs the local Redis at 127.0.0.1:6379. Tests use its DB 15, a namespace of their own where they
can, and delete the keys they wrote.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import socket
import threading
import time
import uuid

import numpy as np
import pytest
import redis

from rag_eval_pipeline.stores import redis_cache
from rag_eval_pipeline.stores.cache import CacheUnavailable, open_store, unseal
from rag_eval_pipeline.stores.redis_cache import RedisCache
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache

pytestmark = pytest.mark.redis

REDIS_URL = "redis://127.0.0.1:6379/15"
_tables = itertools.count()


@pytest.fixture(scope="session")
def raw_redis():
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    client.ping()
    yield client
    client.close()


@pytest.fixture
def table(raw_redis):
    """A table name no other test or process uses; its keys, and those of tables named after it, are
    deleted afterwards."""
    name = f"t{os.getpid()}_{next(_tables)}_{uuid.uuid4().hex[:8]}"
    yield name
    _delete(raw_redis, f"rag_eval:{name}*")


@pytest.fixture
def new_keys(raw_redis):
    """For the fixed-name caches: deletes the keys in their namespaces that appeared during the test."""
    patterns = ("rag_eval:judge_calls:*", "rag_eval:embeddings:*")
    before = {key for pattern in patterns for key in raw_redis.scan_iter(match=pattern, count=1000)}
    yield
    after = {key for pattern in patterns for key in raw_redis.scan_iter(match=pattern, count=1000)}
    if after - before:
        raw_redis.delete(*(after - before))


def _delete(client, pattern: str) -> None:
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture(params=["sqlite", "redis"])
def open_table(request, tmp_path, table):
    """open_table(suffix, namespace) opens a table of one location (a SQLite file or the Redis), via open_store."""
    location = tmp_path / "cache.sqlite" if request.param == "sqlite" else REDIS_URL
    opened = []

    def opener(suffix: str = "", namespace: str = "shared"):
        opened.append(open_store(location, table + suffix, namespace))
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


def test_open_store_picks_the_store_the_location_names(tmp_path, table):
    in_memory, on_disk = open_store(None, table, "shared"), open_store(tmp_path / "c.sqlite", table, "shared")
    shared = open_store(REDIS_URL, table, "tenant:acme")
    assert isinstance(in_memory, SqliteCache) and in_memory.path == "" and open_store("", table, "shared").path == ""
    assert isinstance(on_disk, SqliteCache) and (tmp_path / "c.sqlite").is_file()
    assert isinstance(shared, RedisCache) and shared.path == REDIS_URL and shared.namespace == "tenant:acme"
    with pytest.raises(ValueError, match=r"^cache location postgresql://u:\*\*\*@db/x: a URL must be redis"):
        open_store("postgresql://u:secret@db/x", table, "shared")
    with pytest.raises(ValueError, match="^invalid cache URL redis://127.0.0.1:port/0: "):
        open_store("redis://127.0.0.1:port/0", table, "shared")
    with pytest.raises(ValueError, match="invalid table name"):
        open_store(REDIS_URL, "no-dashes", "shared")
    for namespace in ("acme", "tenant:", "tenant:*", "tenant:acme:x", "tenant:ACME", ""):
        with pytest.raises(ValueError, match="^invalid cache namespace"):
            open_store(REDIS_URL, table, namespace)


def test_get_put_and_len_behave_the_same_in_both_stores(open_table):
    store = open_table()
    assert store.get("a") is None and len(store) == 0
    store.put("a", b"1")
    store.put("a", b"2")  # a second put replaces the value
    store.put_many({f"k{i}": str(i).encode() for i in range(2500)})  # more than one MGET/MSET batch

    assert store.get("a") == b"2"
    found = store.get_many([f"k{i}" for i in range(2500)] + ["k7", "missing"])
    assert len(found) == 2500 and found["k2499"] == b"2499" and "missing" not in found
    assert store.get_many([]) == {} and len(store) == 2501
    store.put_many({})
    assert len(store) == 2501


def test_len_counts_only_its_own_table(open_table, raw_redis, table):
    mine, other = open_table(), open_table("_other")
    mine.put_many({"x": b"1", "y": b"2"})
    other.put("x", b"other")
    raw_redis.set(f"not_ours:{table}:z", b"3")  # another user of the Redis, outside the namespace
    try:
        assert (len(mine), len(other)) == (2, 1)
        assert (mine.get("x"), other.get("x"), other.get("y")) == (b"1", b"other", None)
    finally:
        raw_redis.delete(f"not_ours:{table}:z")


def test_a_namespace_reads_and_counts_only_its_own_entries(open_table):
    acme, globex, shared = open_table(namespace="tenant:acme"), open_table(namespace="tenant:globex"), open_table()
    acme.put_many({"k": b"acme", "only-acme": b"1"})
    globex.put("k", b"globex")

    assert (acme.get("k"), globex.get("k"), shared.get("k")) == (b"acme", b"globex", None)
    assert globex.get_many(["k", "only-acme"]) == {"k": b"globex"} and shared.get_many(["k"]) == {}
    assert (len(acme), len(globex), len(shared)) == (2, 1, 0)


def test_values_and_keys_round_trip_exactly(open_table):
    store = open_table()
    values = {
        "empty": b"",
        "all-bytes": bytes(range(256)) * 3,
        "not-utf8": b"\xff\xfe\x00\xc3\x28",
        "vector": (np.arange(384, dtype=np.float32) / 7).tobytes(),
        "large": os.urandom(1 << 20),
        "model:sha/with*glob?[chars]": b"key with separators and glob characters",
        "clé ünïcode": "é".encode(),
    }
    store.put_many(values)
    assert store.get_many(values) == values
    assert all(store.get(key) == value for key, value in values.items())
    assert len(store) == len(values)


def test_the_redis_keys_are_namespaced_by_table_and_tenant(raw_redis, table):
    open_store(REDIS_URL, table, "tenant:acme").put("model:abc", b"acme's")
    open_store(REDIS_URL, table, "shared").put("model:abc", b"shared")
    assert raw_redis.get(f"rag_eval:{table}:tenant:acme:model:abc") == b"acme's"
    assert raw_redis.get(f"rag_eval:{table}:shared:model:abc") == b"shared"


def test_threads_share_one_redis_store(table):
    store = open_store(REDIS_URL, table, "shared")
    threads = [threading.Thread(target=lambda t=t: [store.put(f"{t}-{i}", b"x") for i in range(100)]) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store) == 400


def _writer_then_reader(table: str, me: int, other: int, barrier, results) -> None:
    """In a spawned process: write this process's keys, wait for the other's, read them back."""
    store = open_store(REDIS_URL, table, "tenant:acme")
    store.put_many({f"{me}-{i}": f"from {me}".encode() for i in range(200)})
    barrier.wait(timeout=60)
    results.put((me, store.get_many(f"{other}-{i}" for i in range(200))))
    store.close()


def test_two_processes_see_each_others_entries(table):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_writer_then_reader, args=(table, me, 1 - me, barrier, results)) for me in (0, 1)]
    for worker in workers:
        worker.start()
    seen = dict(results.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)

    assert [worker.exitcode for worker in workers] == [0, 0]
    for me in (0, 1):
        assert seen[me] == {f"{1 - me}-{i}": f"from {1 - me}".encode() for i in range(200)}
    assert len(open_store(REDIS_URL, table, "tenant:acme")) == 400


def test_the_judge_call_cache_in_redis_answers_a_second_judge(embedder, raw_redis, new_keys):
    from rag_eval_pipeline.core.judging.item import EvalItem
    from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
    from rag_eval_pipeline.core.llm.cache import request_key
    from rag_eval_pipeline.core.llm.client import LLMSettings
    from rag_eval_pipeline.core.metrics.scoring import score_items
    from rag_eval_pipeline.settings import load
    from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply

    unique = uuid.uuid4().hex  # new requests, so the first run cannot hit an earlier test's entries
    items = [
        EvalItem(f"q{i}", f"What is kept ({unique})?", f"Logs are kept for {i} days.", [{"id": "c", "text": "Logs."}])
        for i in range(3)
    ]
    cache = load(environ={"RAG_EVAL_JUDGE_CACHE": REDIS_URL}).judge.cache  # as production sets it
    good = Reply(200, json.dumps({"statements": [{"statement": "Logs are kept.", "verdict": 1}]}))

    def run(server: FakeOpenAIServer):
        judge = build_llm_judge(
            LLMSettings(base_url=server.base_url, model="fake", concurrency=1, max_retries=0), cache_path=cache
        )
        results, _ = score_items(items, judge, embedder, ("faithfulness",))
        return [result.status for item_results in results for result in item_results]

    with FakeOpenAIServer(default=good) as first:
        assert run(first) == ["ok"] * 3
    with FakeOpenAIServer(default=Reply(500, "the cache should have answered")) as second:
        assert run(second) == ["ok"] * 3

    assert (len(first.requests), len(second.requests)) == (3, 0)
    # The key is today's: the sha256 of the request the server received, in the shared namespace (no tenant).
    key = request_key(first.requests[0])
    stored = raw_redis.get(f"rag_eval:judge_calls:shared:{key}")
    assert stored is not None and json.loads(unseal(key, stored))["prompt_tokens"] == 10


def test_the_embedding_cache_in_redis_answers_a_second_embedder(raw_redis, new_keys):
    from rag_eval_pipeline.core.embeddings import MODEL_NAME, Embedder, VectorCodec
    from rag_eval_pipeline.core.text import sha256

    texts = [f"Backups are kept for 30 days ({uuid.uuid4().hex}).", f"Audit records stay a year ({uuid.uuid4().hex})."]
    first = Embedder(REDIS_URL)
    vectors = first.embed(texts)
    second = Embedder(REDIS_URL)  # another connection, as another worker would have
    again = second.embed(texts)

    assert (first.cache_hits, first.cache_misses, second.cache_hits, second.cache_misses) == (0, 2, 2, 0)
    np.testing.assert_array_equal(again, vectors)
    key = f"{MODEL_NAME}:{sha256(texts[0])}"
    stored = raw_redis.get(f"rag_eval:embeddings:shared:{key}")
    np.testing.assert_array_equal(VectorCodec().decode(unseal(key, stored)), vectors[0])


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_redis_that_is_down_is_a_one_line_cache_error_naming_the_url(table):
    url = f"redis://:secret@127.0.0.1:{_closed_port()}/0"
    started = time.monotonic()
    with pytest.raises(CacheUnavailable) as caught:
        open_store(url, table, "shared")

    assert time.monotonic() - started < 30  # refused at once, retried briefly: seconds, never a hang
    message = str(caught.value)
    assert isinstance(caught.value, OSError) and "\n" not in message
    assert message.startswith(f"the cache at redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]} is unavailable: ")
    assert "secret" not in message


def test_a_redis_that_never_answers_fails_within_the_socket_timeout(monkeypatch, table):
    monkeypatch.setattr(redis_cache, "SOCKET_TIMEOUT_S", 0.2)
    with socket.socket() as silent:  # accepts connections (the backlog) and never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        started = time.monotonic()
        with pytest.raises(CacheUnavailable, match=f"^the cache at {url} is unavailable: .*[Tt]imeout"):
            open_store(url, table, "shared")
    assert time.monotonic() - started < 30  # three attempts of 0.2 s and two short pauses, not a hang
