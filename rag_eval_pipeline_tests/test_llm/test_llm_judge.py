"""The LLM judge end to end against the real local llama.cpp server, and its failure paths.

SmolLM2-135M's verdicts are near chance: these tests check plumbing (schemas, call counts, cache,
concurrency, truncation, a dead server), never the scores' accuracy.
"""

import asyncio
import json

import pytest

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Failure, total_usage
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import LLMMisconfigured, LLMSettings, LLMUnavailable, StructuredLLM
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply
from rag_eval_pipeline_tests.support.local_llm_server import LocalLlamaServer

CORE = ("faithfulness", "answer_relevance", "context_recall", "context_precision")
# The local server answers one request at a time on a few shared CPU cores: a queued call can wait minutes.
SLOW_CPU_TIMEOUT_S = 300.0
ITEMS = [
    EvalItem(
        "q1",
        "How long are API logs kept?",
        "API logs are kept for 90 days.",
        [
            {"id": "a#0", "text": "API request logs are kept for 90 days and then deleted."},
            {"id": "b#0", "text": "The cafeteria opens at 8 am."},
        ],
        "API request logs are kept for 90 days.",
        ["a#0"],
    ),
    EvalItem(
        "q2",
        "Who approves retention exceptions?",
        "The Security Office approves them.",
        [{"id": "c#1", "text": "Retention exceptions are approved by the Security and Compliance Office."}],
        "The Security and Compliance Office approves retention exceptions.",
        ["c#1"],
    ),
    EvalItem(
        "q3",
        "What is the hotel cap in Paris?",
        "I don't know.",
        [{"id": "d#2", "text": "The hotel cap is EUR 230 per night in London and Paris."}],
        "The hotel cap in Paris is EUR 230 per night.",
        ["d#2"],
    ),
]


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


def judge_for(server_url, model, cache=None, mode="decomposed", **settings):
    settings = {"timeout_s": SLOW_CPU_TIMEOUT_S, **settings}
    llm_settings = LLMSettings(base_url=server_url, model=model, response_format="json_object_schema", **settings)
    return LLMJudge(StructuredLLM(llm_settings, cache), mode=mode)


def _assert_well_formed(results):
    for item_results in results:
        assert [r.metric for r in item_results] == list(CORE)
        for result in item_results:
            assert (result.status == "ok" and 0.0 <= result.score <= 1.0) or (
                result.status == "unmeasured" and result.score is None and result.reason
            )


@pytest.mark.llm
def test_decomposed_mode_makes_two_calls_per_item_and_the_cache_makes_none(llama_server, embedder, tmp_path):
    cache = LLMCallCache(tmp_path / "judge.sqlite")
    first, judgements = score_items(ITEMS, judge_for(llama_server.base_url, llama_server.model, cache), embedder, CORE)
    _assert_well_formed(first)
    usage = total_usage(judgements)
    assert set(usage) == {"answer", "ground_truth"}
    first_calls = sum(kind["calls"] - kind["retries"] for kind in usage.values())
    assert first_calls == 2 * len(ITEMS)
    assert all(kind["prompt_tokens"] > 0 and kind["completion_tokens"] > 0 for kind in usage.values())

    # A failed call (a reply still invalid after its retry) is not cached: a re-run sends it again.
    failed = sum(_call_failed(j.answer_statements) + _call_failed(j.ground_truth_support) for j in judgements)
    # A re-run (a new judge, the same on-disk cache) calls nothing else and scores identically.
    again, judgements = score_items(
        ITEMS,
        judge_for(llama_server.base_url, llama_server.model, LLMCallCache(tmp_path / "judge.sqlite")),
        embedder,
        CORE,
    )
    usage = total_usage(judgements)
    assert sum(kind["calls"] - kind["retries"] for kind in usage.values()) == failed
    assert sum(kind["cache_hits"] for kind in usage.values()) == 2 * len(ITEMS) - failed
    assert [(r.metric, r.score, r.status, r.reason) for rs in again for r in rs] == [
        (r.metric, r.score, r.status, r.reason) for rs in first for r in rs
    ]


def _call_failed(judged) -> bool:
    """A call whose reply stayed invalid after its retry (not a valid reply the judge found nothing in)."""
    return isinstance(judged, Failure) and "after one retry" in judged.reason


@pytest.mark.llm
def test_fused_mode_makes_one_call_per_item(llama_server, embedder):
    items = ITEMS[:2]  # a fused reply is long on a CPU server: two items show "one call each" as well as three
    results, judgements = score_items(
        items, judge_for(llama_server.base_url, llama_server.model, mode="fused"), embedder, CORE
    )
    _assert_well_formed(results)
    usage = total_usage(judgements)
    assert set(usage) == {"fused_triad"}
    assert usage["fused_triad"]["calls"] - usage["fused_triad"]["retries"] == len(items)


@pytest.mark.llm
def test_concurrency_is_bounded(llama_server, embedder):
    judge = judge_for(llama_server.base_url, llama_server.model, concurrency=2)
    in_flight, peak = 0, 0
    original = judge.llm.call

    async def counting(*args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await original(*args, **kwargs)
        finally:
            in_flight -= 1

    judge.llm.call = counting
    results, _ = score_items(ITEMS, judge, embedder, CORE)
    _assert_well_formed(results)
    assert peak == 2  # several calls were in flight at once, never more than allowed


@pytest.mark.llm
def test_truncated_replies_are_retried_once_then_unmeasured(llama_server, embedder):
    judge = judge_for(llama_server.base_url, llama_server.model, max_tokens=4)
    results, judgements = score_items(ITEMS[:1], judge, embedder, ("faithfulness", "context_recall"))
    for result in results[0]:
        assert result.status == "unmeasured"
        assert "truncated at max_tokens=8 (after one retry)" in result.reason
    assert all(kind["calls"] == 2 and kind["retries"] == 1 for kind in total_usage(judgements).values())


@pytest.mark.llm
def test_json_schema_mode_on_llama_cpp_is_a_clear_configuration_error(llama_server, embedder):
    settings = LLMSettings(base_url=llama_server.base_url, model=llama_server.model, response_format="json_schema")
    with pytest.raises(LLMMisconfigured, match="json_object_schema"):
        score_items(ITEMS[:1], LLMJudge(StructuredLLM(settings)), embedder, ("faithfulness",))


@pytest.mark.llm
def test_a_killed_server_fails_with_its_url(embedder):
    with LocalLlamaServer() as server:
        url, model = server.base_url, server.model
        server.kill()
        judge = judge_for(url, model, max_retries=1)
        with pytest.raises(LLMUnavailable, match=url.replace(".", r"\.")):
            score_items(ITEMS[:1], judge, embedder, ("faithfulness",))


# --- failure paths the real server cannot produce, driven by the named fake -------------------------


def _call(server: FakeOpenAIServer, schema, **settings):
    from rag_eval_pipeline.core.judging.llm_judge import StatementVerdicts

    llm = StructuredLLM(LLMSettings(base_url=server.base_url, model="fake", **settings))

    async def run():
        llm.open()
        try:
            return await llm.call("answer_statements", [{"role": "user", "content": "x"}], schema or StatementVerdicts)
        finally:
            await llm.close()

    return asyncio.run(run())


GOOD = json.dumps({"statements": [{"statement": "Logs are kept for 90 days.", "verdict": 1}]})


def test_invalid_json_is_retried_with_a_reminder_then_accepted():
    with FakeOpenAIServer([(200, "Sure! Here is the JSON:", "stop"), (200, GOOD, "stop")]) as server:
        result = _call(server, None)
    assert result.parsed is not None and result.usage["retries"] == 1
    assert "follows the schema" in server.requests[1]["messages"][-1]["content"]


def test_invalid_twice_is_a_failure_with_the_reason():
    bad_verdict = json.dumps({"statements": [{"statement": "x", "verdict": 7}]})
    with FakeOpenAIServer([(200, "{not json", "stop"), (200, bad_verdict, "stop")]) as server:
        result = _call(server, None)
    assert result.parsed is None
    assert "does not match the answer_statements schema" in result.failure and "after one retry" in result.failure


def test_a_raw_newline_inside_a_json_string_is_accepted():
    with FakeOpenAIServer([(200, '{"statements": [{"statement": "two\nlines", "verdict": 0}]}', "stop")]) as server:
        result = _call(server, None)
    assert result.parsed.statements[0].statement == "two\nlines"


def test_a_503_is_retried_and_a_400_is_not():
    with FakeOpenAIServer(
        [Reply(503, "loading model", headers={"retry-after-ms": "10"}), (200, GOOD, "stop")]
    ) as server:
        assert _call(server, None).parsed is not None
    with FakeOpenAIServer([(400, "maximum context length is 2048 tokens", "stop")]) as server:
        with pytest.raises(LLMMisconfigured, match="HTTP 400.*maximum context length"):
            _call(server, None)
        assert len(server.requests) == 1


def test_a_verdict_count_that_does_not_match_is_unmeasured(embedder):
    # A server that ignores the schema's exact lengths: the reply fails validation, is asked again, then unmeasured.
    reply = json.dumps({"sentence_verdicts": [1, 0, 1], "chunk_relevance": [1]})
    with FakeOpenAIServer([(200, reply, "stop")] * 2) as server:
        judge = LLMJudge(StructuredLLM(LLMSettings(base_url=server.base_url, model="fake")))
        results, _ = score_items(ITEMS[:1], judge, embedder, ("context_recall", "context_precision"))
    recall, precision = results[0]
    for result in (recall, precision):
        assert result.status == "unmeasured" and "sentence_verdicts" in result.reason, result
        assert "does not match the ground_truth schema" in result.reason and "after one retry" in result.reason
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert (schema["sentence_verdicts"]["minItems"], schema["sentence_verdicts"]["maxItems"]) == (1, 1)
    assert (schema["chunk_relevance"]["minItems"], schema["chunk_relevance"]["maxItems"]) == (2, 2)
