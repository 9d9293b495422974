"""Per-tenant cache namespaces and the checks on read, in both stores (a SQLite file and the Redis).

The reported attack: a tenant overwrote another tenant's cached embeddings, and the victim's unchanged
reference candidate went from a hit rate of 1.0 to 0.33; and `embedding_cache_hits` told a tenant
whether anyone had embedded a text. Redis tests use DB 15, tenants of their own (random names) and
texts of their own, and delete the keys they wrote.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid

import numpy as np
import pytest
from dagster import DagsterInstance, DagsterRun, Output, asset, build_resources, materialize

from rag_eval_pipeline.core.embeddings import MODEL_NAME, Embedder, VectorCodec
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.retrieval import ReferenceCandidate
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.partitions import register_partition, tenant_version_partitions
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource
from rag_eval_pipeline.resources.embedder import CacheTenant, CacheTenantError, run_cache_tenant
from rag_eval_pipeline.stores.cache import namespace_of, seal, unseal

REDIS_URL = "redis://127.0.0.1:6379/15"
SHARING = "RAG_EVAL_CACHE_SHARED_ACROSS_TENANTS"
CACHE_LOG = "rag_eval_pipeline.stores.cache"
RUN_CALL = f"call-{uuid.uuid4().hex}"  # a judge-call key of this process's only: no entry holds it yet


class RawEntries:
    """A cache table's stored bytes, read and overwritten behind the cache's back (as a fault or an
    attacker with access to the store would)."""

    def __init__(self, location: str, table: str):
        self.location, self.table = location, table

    def get(self, tenant: str | None, key: str) -> bytes:
        if self.location == REDIS_URL:
            value = _redis().get(self._redis_key(tenant, key))
        else:
            with sqlite3.connect(self.location) as db:
                row = db.execute(
                    f"SELECT value FROM {self.table} WHERE namespace = ? AND key = ?", (namespace_of(tenant), key)
                ).fetchone()
            value = row[0] if row else None
        assert isinstance(value, bytes), f"no entry for {key} in {namespace_of(tenant)}"
        return value

    def overwrite(self, tenant: str | None, key: str, blob: bytes) -> None:
        if self.location == REDIS_URL:
            _redis().set(self._redis_key(tenant, key), blob)
            return
        with sqlite3.connect(self.location) as db:
            db.execute(
                f"UPDATE {self.table} SET value = ? WHERE namespace = ? AND key = ?", (blob, namespace_of(tenant), key)
            )
            assert db.total_changes == 1

    def _redis_key(self, tenant: str | None, key: str) -> str:
        return f"rag_eval:{self.table}:{namespace_of(tenant)}:{key}"


def _redis():
    import redis

    return redis.Redis.from_url(REDIS_URL, socket_timeout=5)


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def location(request, tmp_path):
    """Where the caches live: a fresh SQLite file, or the test Redis (the keys written are deleted after)."""
    if request.param == "sqlite":
        yield str(tmp_path / "cache.sqlite")
        return
    client = _redis()
    before = set(client.scan_iter(match="rag_eval:*", count=1000))
    yield REDIS_URL
    written = set(client.scan_iter(match="rag_eval:*", count=1000)) - before
    if written:
        client.delete(*written)
    client.close()


@pytest.fixture
def tenants():
    """Tenant names no other test or process uses."""
    return [f"t{uuid.uuid4().hex[:12]}" for _ in range(4)]


def _key(text: str) -> str:
    return f"{MODEL_NAME}:{sha256(text)}"


def _unique(*texts: str) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"{text} ({tag})" for text in texts]


# --- the reported attack: another tenant's writes change a tenant's result ------------------------------


QUESTIONS = ["How long are backups kept?", "When is lunch served?", "How often must passwords change?"]


def _hit_rate(embedder: Embedder, chunks: list[str]) -> float:
    """The reference candidate's top-1 hit rate: question i's gold chunk is chunk i."""
    candidate = ReferenceCandidate([f"c{i}" for i in range(len(chunks))], chunks, embedder, top_k=1)
    return sum(top == [i] for i, top in enumerate(candidate.retrieve_many(QUESTIONS))) / len(QUESTIONS)


def _poison(attacker: Embedder, chunks: list[str]) -> None:
    """What a tenant's process can do through its own cache: store the first two chunks' vectors swapped,
    each sealed for the key it is stored under, as an honest entry would be."""
    vectors = attacker.embed(chunks)
    attacker._cache.put_many({_key(chunks[0]): vectors[1], _key(chunks[1]): vectors[0]})


def _chunks() -> list[str]:
    return _unique(
        "Backups are kept for thirty days in the cold store.",
        "The office cafeteria serves lunch from noon to two.",
        "Passwords must be rotated every ninety days.",
    )


def test_another_tenants_writes_leave_a_tenants_result_unchanged(location, tenants):
    victim, attacker = tenants[:2]
    chunks = _chunks()
    assert _hit_rate(Embedder(location, tenant=victim), chunks) == 1.0

    _poison(Embedder(location, tenant=attacker), chunks)

    again = Embedder(location, tenant=victim)
    assert _hit_rate(again, chunks) == 1.0
    assert again.cache_misses == 0  # the victim's own entries answered, untouched
    assert _hit_rate(Embedder(location, tenant=attacker), chunks) == pytest.approx(1 / 3)  # it did write


def test_with_sharing_on_the_same_writes_change_the_other_tenants_result(location):
    """The attack as reported, and the reason sharing is off by default: both tenants' runs use the
    shared namespace (tenant None), and an entry sealed for its key passes every check."""
    chunks = _chunks()
    assert _hit_rate(Embedder(location, tenant=None), chunks) == 1.0

    _poison(Embedder(location, tenant=None), chunks)

    assert _hit_rate(Embedder(location, tenant=None), chunks) == pytest.approx(1 / 3)


# --- tenants' namespaces: separate by default, shared by the operator's choice ---------------------------


def test_a_tenants_entries_are_no_hits_for_another_tenant(location, tenants):
    texts = _unique("Audit records stay a year.", "Logs are kept for ninety days.")
    first = Embedder(location, tenant=tenants[0])
    vectors = first.embed(texts)
    other = Embedder(location, tenant=tenants[1])
    other.embed(texts)
    again = Embedder(location, tenant=tenants[0])
    np.testing.assert_array_equal(again.embed(texts), vectors)

    assert (first.cache_hits, first.cache_misses) == (0, 2)
    assert (other.cache_hits, other.cache_misses) == (0, 2)  # the other tenant learns nothing from its hits
    assert (again.cache_hits, again.cache_misses) == (2, 0)
    assert len(again._cache) == len(other._cache) == 2 and len(Embedder(location, tenant=tenants[2])._cache) == 0


def test_judge_calls_are_kept_per_tenant(location, tenants):
    LLMCallCache(location, tenant=tenants[0]).put(RUN_CALL, '{"verdict": 1}', 10, 2)
    assert LLMCallCache(location, tenant=tenants[0]).get(RUN_CALL) == ('{"verdict": 1}', 10, 2)
    assert LLMCallCache(location, tenant=tenants[1]).get(RUN_CALL) is None
    assert (
        LLMCallCache(location, tenant=None).get(RUN_CALL) is None
        and len(LLMCallCache(location, tenant=tenants[1])) == 0
    )


# --- checks on read: a damaged or misplaced entry is a miss, computed again and repaired -----------------


def _corruptions(key: str, own_entry: bytes, other_entry: bytes, other_vector: np.ndarray) -> dict[str, bytes]:
    """Ways the entry stored for `key` may be wrong: another text's, damaged, or of the wrong shape."""
    header = VectorCodec.header
    return {
        "another text's entry": other_entry,
        "another text's vector, unsealed": other_vector.tobytes(),
        "garbage": uuid.uuid4().bytes * 50,
        "empty": b"",
        "truncated": own_entry[:-4],
        "a flipped bit": own_entry[:-1] + bytes([own_entry[-1] ^ 1]),  # still a finite vector: the checksum tells
        "float64": seal(key, b"float64le:384:" + other_vector.astype(np.float64).tobytes()),
        "float32 of 192 dimensions": seal(key, b"float32le:192:" + other_vector[:192].tobytes()),
        "too short": seal(key, header + other_vector[:383].tobytes()),
        "not finite": seal(key, header + np.full(384, np.nan, dtype=np.float32).tobytes()),
    }


@pytest.mark.parametrize("kind", list(_corruptions("k", b"x" * 100, b"y" * 100, np.zeros(384, np.float32))))
def test_a_damaged_embedding_is_embedded_again_and_repaired(location, tenants, embedder, kind, caplog):
    tenant = tenants[0]
    text, other = _unique("Backups are kept for thirty days.", "Lunch is served from noon.")
    Embedder(location, tenant=tenant).embed([text, other])
    raw = RawEntries(location, "embeddings")
    own_entry, other_entry = raw.get(tenant, _key(text)), raw.get(tenant, _key(other))
    other_vector = VectorCodec().decode(unseal(_key(other), other_entry))
    raw.overwrite(tenant, _key(text), _corruptions(_key(text), own_entry, other_entry, other_vector)[kind])

    reader = Embedder(location, tenant=tenant)
    with caplog.at_level(logging.WARNING, logger=CACHE_LOG):
        found = reader.embed([text])

    fresh = embedder.embed([text])[0]  # the session's in-memory embedder: a fresh computation
    np.testing.assert_allclose(found[0], fresh, atol=1e-5)
    assert (reader.cache_hits, reader.cache_misses) == (0, 1)
    warnings = [r for r in caplog.records if r.name == CACHE_LOG and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and _key(text) in warnings[0].getMessage()
    # Repaired: the stored entry is sealed for its key again, and the next reader trusts it.
    np.testing.assert_allclose(VectorCodec().decode(unseal(_key(text), raw.get(tenant, _key(text)))), fresh, atol=1e-5)
    after = Embedder(location, tenant=tenant)
    np.testing.assert_allclose(after.embed([text])[0], fresh, atol=1e-5)
    assert (after.cache_hits, after.cache_misses) == (1, 0)


def test_many_damaged_entries_warn_once_per_cache(location, tenants, caplog):
    tenant = tenants[0]
    texts = _unique("One.", "Two.", "Three.")
    Embedder(location, tenant=tenant).embed(texts)
    raw = RawEntries(location, "embeddings")
    for text in texts:
        raw.overwrite(tenant, _key(text), b"garbage")

    reader = Embedder(location, tenant=tenant)
    with caplog.at_level(logging.WARNING, logger=CACHE_LOG):
        reader.embed(texts)
        reader.embed(texts)  # repaired: no more warnings, and hits now

    assert len([r for r in caplog.records if r.name == CACHE_LOG]) == 1
    assert reader._cache.rejected == 3 and (reader.cache_hits, reader.cache_misses) == (3, 3)


def test_a_damaged_judge_call_is_a_miss(location, tenants, caplog):
    tenant, key, other = tenants[0], "a" * 64, "b" * 64
    cache = LLMCallCache(location, tenant=tenant)
    cache.put(key, '{"verdict": 1}', 10, 2)
    cache.put(other, '{"verdict": 0}', 11, 3)
    raw = RawEntries(location, "judge_calls")
    other_entry = raw.get(tenant, other)
    damaged = {
        "another call's reply": other_entry,
        "garbage": b"\xff\x00 not json",
        "unsealed reply": json.dumps(
            {"content": '{"verdict": 0}', "prompt_tokens": 1, "completion_tokens": 1}
        ).encode(),
        "invalid JSON": seal(key, b'{"content": "{\\"verdict\\": 1}", "prompt_tokens": 10,'),
        "content not JSON": seal(
            key, json.dumps({"content": "{verdict", "prompt_tokens": 1, "completion_tokens": 1}).encode()
        ),
        "no token counts": seal(
            key, json.dumps({"content": "{}", "prompt_tokens": True, "completion_tokens": 1}).encode()
        ),
        "not an object": seal(key, b"[1, 2]"),
        "nested too deep": seal(key, b"[" * 100_000),
    }
    with caplog.at_level(logging.WARNING, logger=CACHE_LOG):
        for kind, blob in damaged.items():
            raw.overwrite(tenant, key, blob)
            assert cache.get(key) is None, kind

    assert len([r for r in caplog.records if r.name == CACHE_LOG]) == 1
    cache.put(key, '{"verdict": 1}', 10, 2)  # what the client does after asking the server again
    assert LLMCallCache(location, tenant=tenant).get(key) == ('{"verdict": 1}', 10, 2)
    assert cache.get(other) == ('{"verdict": 0}', 11, 3)


@pytest.mark.redis
def test_a_damaged_judge_call_in_redis_is_asked_again_and_repaired(embedder, tenants):
    from rag_eval_pipeline.core.judging.item import EvalItem
    from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
    from rag_eval_pipeline.core.llm.cache import request_key
    from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM
    from rag_eval_pipeline.core.metrics.scoring import score_items
    from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply

    tenant, unique = tenants[0], uuid.uuid4().hex
    items = [
        EvalItem(f"q{i}", f"What is kept ({unique})?", f"Logs are kept {i} days.", [{"id": "c", "text": "Logs."}])
        for i in range(2)
    ]
    good = Reply(200, json.dumps({"statements": [{"statement": "Logs are kept.", "verdict": 1}]}))

    def run(server: FakeOpenAIServer) -> list[str]:
        llm = StructuredLLM(
            LLMSettings(base_url=server.base_url, model="fake", concurrency=1, max_retries=0),
            LLMCallCache(REDIS_URL, tenant=tenant),
        )
        results, _ = score_items(items, LLMJudge(llm), embedder, ("faithfulness",))
        return [result.status for item_results in results for result in item_results]

    raw = RawEntries(REDIS_URL, "judge_calls")
    try:
        with FakeOpenAIServer(default=good) as first:
            assert run(first) == ["ok", "ok"]
        damaged = request_key(first.requests[0])
        raw.overwrite(tenant, damaged, raw.get(tenant, request_key(first.requests[1])))
        with FakeOpenAIServer(default=good) as second:
            assert run(second) == ["ok", "ok"]
        with FakeOpenAIServer(default=Reply(500, "the cache should have answered")) as third:
            assert run(third) == ["ok", "ok"]
    finally:
        client = _redis()
        keys = list(client.scan_iter(match=f"rag_eval:judge_calls:{namespace_of(tenant)}:*"))
        if keys:
            client.delete(*keys)

    assert (len(first.requests), len(second.requests), len(third.requests)) == (2, 1, 0)
    assert request_key(second.requests[0]) == damaged  # only the damaged call was asked again


# --- which tenant a run's caches belong to: its partition's, never anything else -------------------------


def _run(**tags: str) -> DagsterRun:
    return DagsterRun(job_name="a_job", run_id=str(uuid.uuid4()), tags=tags)


def test_a_runs_cache_tenant_is_its_partitions():
    run = _run(**{"dagster/partition": "v1|acme", "dagster/partition/tenant": "acme"})
    assert run_cache_tenant(run, shared_across_tenants=False) == CacheTenant("acme")
    assert run_cache_tenant(run, shared_across_tenants=True) == CacheTenant(None)
    refused = {
        "no partition": _run(),
        "a partition range": _run(
            **{"dagster/asset_partition_range_start": "v1|acme", "dagster/asset_partition_range_end": "v1|globex"}
        ),
        "a key of one dimension": _run(**{"dagster/partition": "acme"}),
        "an invalid tenant name": _run(**{"dagster/partition": "v1|Acme"}),
        "a tenant tag that disagrees": _run(**{"dagster/partition": "v1|acme", "dagster/partition/tenant": "globex"}),
    }
    for case, refused_run in refused.items():
        tenant = run_cache_tenant(refused_run, shared_across_tenants=False)
        with pytest.raises(CacheTenantError, match=rf"^run {refused_run.run_id} may not use the caches: "):
            tenant.require()
        assert run_cache_tenant(refused_run, shared_across_tenants=True).require() is None, case


def test_outside_any_run_the_caches_are_the_shared_namespace(tmp_path):
    path, (text,) = str(tmp_path / "e.sqlite"), _unique("Outside any run.")
    with build_resources({"embedder": EmbedderResource(cache_path=path)}) as resources:
        resources.embedder.get().embed([text])
    assert RawEntries(path, "embeddings").get(None, _key(text))


# Unique to this process: the shared namespace of the Redis holds no entry for them yet.
RUN_TEXTS = _unique("Backups are kept for thirty days.", "Passwords rotate every ninety days.")


@asset(partitions_def=tenant_version_partitions)
def _embedded_texts(context, embedder: EmbedderResource, judge: JudgeResource) -> Output[None]:
    model = embedder.get()
    hits, misses = model.cache_hits, model.cache_misses
    model.embed(RUN_TEXTS)
    judge.call_cache().put(RUN_CALL, json.dumps({"partition": str(context.partition_key)}), 1, 1)
    return Output(None, metadata={"hits": model.cache_hits - hits, "misses": model.cache_misses - misses})


@pytest.mark.dagster
def test_runs_of_two_tenants_keep_apart_unless_the_operator_shares(location, tenants, monkeypatch):
    instance = DagsterInstance.ephemeral()
    embedder = EmbedderResource(cache_path=location)
    resources = {"embedder": embedder, "judge": JudgeResource(embedder=embedder, cache_path=location)}

    def run(tenant: str, version: str = "v1") -> dict:
        result = materialize(
            [_embedded_texts],
            partition_key=register_partition(instance, tenant, version),
            instance=instance,
            resources=resources,
        )
        assert result.success
        metadata = result.asset_materializations_for_node("_embedded_texts")[0].metadata
        return {name: metadata[name].value for name in ("hits", "misses")}

    a, b, c, d = tenants
    monkeypatch.delenv(SHARING, raising=False)
    assert run(a) == {"hits": 0, "misses": 2}
    assert run(b) == {"hits": 0, "misses": 2}  # a's entries are no hits for b
    assert run(a, "v2") == {"hits": 2, "misses": 0}  # a's own are
    a_call, b_call = (LLMCallCache(location, tenant=tenant).get(RUN_CALL) for tenant in (a, b))
    assert a_call is not None and "v2" in a_call[0]  # each tenant's judge wrote to its own namespace
    assert b_call is not None and "v1" in b_call[0]
    assert LLMCallCache(location, tenant=c).get(RUN_CALL) is None
    assert LLMCallCache(location, tenant=None).get(RUN_CALL) is None

    monkeypatch.setenv(SHARING, "true")  # the operator's choice, read where the run executes
    assert run(c) == {"hits": 0, "misses": 2}
    assert run(d) == {"hits": 2, "misses": 0}  # shared: d hits c's entries, and so learns c embedded them
    assert LLMCallCache(location, tenant=None).get(RUN_CALL) is not None
