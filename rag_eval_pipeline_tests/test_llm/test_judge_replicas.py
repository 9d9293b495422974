"""Judge nodes from the client's side: replicas of one model take the calls in turn, vLLM's cache salt and
priority go with every request when set (and never otherwise), and neither the replica nor the salt is
part of the call cache's key. The Dagster resource salts each run's requests with its tenant's salt."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from dagster import DagsterRun

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM
from rag_eval_pipeline.resources import EmbedderResource
from rag_eval_pipeline.resources.judge import JudgeResource, tenant_cache_salt
from rag_eval_pipeline.settings import SettingsError
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply, follow_the_schema

ITEMS = [
    EvalItem(f"q{i}", f"Question {i}?", f"Answer number {i}.", [{"id": f"c{i}", "text": f"Chunk {i}."}])
    for i in range(4)
]
GOOD = Reply(200, json.dumps({"statements": [{"statement": "A statement.", "verdict": 1}]}))
VLLM_EXTRAS = ("cache_salt", "priority")


def _judge(base_url, cache: LLMCallCache | None = None, **settings) -> LLMJudge:
    llm_settings = LLMSettings(base_url=base_url, model="fake", concurrency=1, **settings)
    return LLMJudge(StructuredLLM(llm_settings, cache if cache is not None else LLMCallCache()))


def _questions(server: FakeOpenAIServer) -> list[str]:
    return [body["messages"][-1]["content"].split("QUESTION: ")[1].split("\n")[0] for body in server.requests]


def test_calls_alternate_between_replicas():
    with FakeOpenAIServer(default=GOOD) as first, FakeOpenAIServer(default=GOOD) as second:
        judgements = _judge(f"{first.base_url}, {second.base_url}").judge_many(ITEMS, {ANSWER_STATEMENTS})
    assert all(j.answer_statements for j in judgements)
    # Concurrency 1: items ask in order, so the replicas take every other one.
    assert _questions(first) == ["Question 0?", "Question 2?"]
    assert _questions(second) == ["Question 1?", "Question 3?"]


def test_a_retry_goes_to_the_next_replica():
    failing = Reply(500, "node restarting", headers={"retry-after-ms": "10"})
    with FakeOpenAIServer(default=failing) as down, FakeOpenAIServer(default=GOOD) as up:
        [judgement] = _judge([down.base_url, up.base_url], max_retries=1).judge_many(ITEMS[:1], {ANSWER_STATEMENTS})
    assert judgement.answer_statements and len(down.requests) == len(up.requests) == 1


def test_cache_salt_and_priority_go_with_every_request_only_when_set():
    with FakeOpenAIServer(default=GOOD) as server:
        _judge(server.base_url, cache_salt="tenant-salt", priority=3).judge_many(ITEMS[:2], {ANSWER_STATEMENTS})
        salted = list(server.requests)
        server.requests.clear()
        _judge(server.base_url).judge_many(ITEMS[:2], {ANSWER_STATEMENTS})
    assert [(body["cache_salt"], body["priority"]) for body in salted] == [("tenant-salt", 3)] * 2
    assert all(not set(VLLM_EXTRAS) & set(body) for body in server.requests)
    assert all("guided_json" not in body for body in salted + server.requests)  # vLLM's old field: never sent
    assert salted[0]["response_format"]["type"] == "json_schema"


def test_the_cache_key_depends_on_neither_the_replica_nor_the_salt():
    cache = LLMCallCache()
    with FakeOpenAIServer(default=GOOD) as first, FakeOpenAIServer(default=GOOD) as second:
        _judge([first.base_url, second.base_url], cache, cache_salt="a").judge_many(ITEMS, {ANSWER_STATEMENTS})
    with FakeOpenAIServer(default=Reply(500, "the cache should answer")) as third:
        again = _judge(third.base_url, cache, cache_salt="b", priority=1).judge_many(ITEMS, {ANSWER_STATEMENTS})
    assert len(third.requests) == 0 and all(j.answer_statements for j in again)


def test_base_urls_read_from_a_comma_separated_string_or_a_list():
    assert LLMSettings(base_url=" http://a:1/v1 , http://b:2/v1,", model="m").base_urls == (
        "http://a:1/v1",
        "http://b:2/v1",
    )
    assert LLMSettings(base_url=["http://a:1/v1"], model="m").base_urls == ("http://a:1/v1",)
    with pytest.raises(ValueError, match="needs a base URL"):
        LLMSettings(base_url=" , ", model="m")
    with pytest.raises(ValueError, match="priority"):
        LLMSettings(base_url="http://a:1/v1", model="m", priority="high")  # type: ignore[arg-type]


def test_priorities_from_the_environment():
    judge = settings.load(
        environ={"RAG_EVAL_JUDGE_PRIORITY": "5", "RAG_EVAL_JUDGE_PRIORITY_BY_TIER": "small=0, large=10"}
    ).judge
    assert (judge.priority, judge.priority_by_tier) == (5, {"small": 0, "large": 10})
    assert settings.load(environ={}).judge.priority is None
    with pytest.raises(SettingsError, match=r"^RAG_EVAL_JUDGE_PRIORITY_BY_TIER must be tier=priority pairs.*'huge=1'"):
        settings.load(environ={"RAG_EVAL_JUDGE_PRIORITY_BY_TIER": "small=0,huge=1"})


def _resource_in_run(partition: str, **fields) -> JudgeResource:
    resource = JudgeResource(embedder=EmbedderResource(), kind="llm", base_url="http://a:1/v1", model="m", **fields)
    run = DagsterRun(job_name="a_job", run_id="r1", tags={"dagster/partition": partition})
    resource.setup_for_execution(SimpleNamespace(run=run))  # type: ignore[arg-type]
    return resource


def test_the_resource_salts_each_tenants_requests_and_sets_its_tiers_priority(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_LARGE_TENANTS", "globex")
    tiers = {"priority": 7, "priority_by_tier": {"large": 10}}
    acme, globex = (
        _resource_in_run("v1|acme", **tiers).llm_settings(),
        _resource_in_run("v1|globex", **tiers).llm_settings(),
    )
    assert acme.cache_salt == tenant_cache_salt("acme") != globex.cache_salt == tenant_cache_salt("globex")
    assert (acme.priority, globex.priority) == (7, 10)  # acme is small: no entry for its tier, the plain priority
    outside = JudgeResource(embedder=EmbedderResource(), kind="llm", base_url="http://a:1/v1", model="m")
    assert (outside.llm_settings().cache_salt, outside.llm_settings().priority) == (None, None)


def test_the_resource_refuses_an_unknown_tier():
    with pytest.raises(ValueError, match="priority_by_tier names tiers"):
        JudgeResource(embedder=EmbedderResource(), priority_by_tier={"medium": 1})


@pytest.mark.llm
def test_the_llama_cpp_server_ignores_the_vllm_fields(llama_server):
    llm_settings = LLMSettings(
        base_url=llama_server.base_url,
        model=llama_server.model,
        response_format="json_object_schema",
        cache_salt="tenant-salt",
        priority=3,
        timeout_s=300,
    )
    [judgement] = LLMJudge(StructuredLLM(llm_settings)).judge_many(ITEMS[:1], {ANSWER_STATEMENTS})
    assert isinstance(judgement.answer_statements, list)  # answered: the server took the request


def test_the_schema_following_fake_answers_any_judge_request():
    with FakeOpenAIServer(default=follow_the_schema) as server:
        [judgement] = _judge(server.base_url).judge_many(ITEMS[:1], {ANSWER_STATEMENTS})
    assert judgement.answer_statements and len(server.requests) == 1
