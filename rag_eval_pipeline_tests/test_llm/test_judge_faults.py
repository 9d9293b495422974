"""Judge faults, injected by the named FakeOpenAIServer: what is retried, what is scored, what is
unmeasured, what stops the run and what a rerun repeats (counted in requests the server received).

Every case scores faithfulness only: one `answer_statements` call per item, so requests map to items.
Retries are sped up with the server's own `retry-after-ms` header, which the openai client honours.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import LLMMisconfigured, LLMSettings, LLMUnavailable, StructuredLLM
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline_tests.fake_openai_server import DROP, HANG, REFUSE, FakeOpenAIServer, Reply

ITEMS = [
    EvalItem(
        f"q{i}",
        f"How long are {topic} kept?",
        f"{topic.capitalize()} are kept for {days} days.",
        [{"id": f"c{i}", "text": f"{topic.capitalize()} are kept for {days} days."}],
        "",
        [f"c{i}"],
    )
    for i, (topic, days) in enumerate([("API logs", 90), ("audit records", 365), ("backups", 30)])
]
GOOD = Reply(200, json.dumps({"statements": [{"statement": "They are kept.", "verdict": 1}]}))
FAST = {"retry-after-ms": "10"}  # the server asks for a 10 ms wait before the retry


def _judge(server: FakeOpenAIServer, cache: LLMCallCache, **settings) -> LLMJudge:
    settings = {"concurrency": 1, "max_retries": 2, **settings}  # concurrency 1: requests come in item order
    return LLMJudge(StructuredLLM(LLMSettings(base_url=server.base_url, model="fake", **settings), cache))


def _statuses(judge: LLMJudge, embedder) -> Counter:
    results, _ = score_items(ITEMS, judge, embedder, ("faithfulness",))
    flat = [result for item_results in results for result in item_results]
    for result in flat:  # a score is a number in [0, 1] or absent with a reason, never NaN
        assert (result.status == "ok" and math.isfinite(result.score) and 0 <= result.score <= 1) or (
            result.status == "unmeasured" and result.score is None and result.reason
        ), result
    return Counter(result.status for result in flat)


def _rerun_requests(cache: LLMCallCache, embedder) -> int:
    """Rerun against a healthy server with the same cache: every item is scored; returns the requests sent."""
    with FakeOpenAIServer(default=GOOD) as healthy:
        assert _statuses(_judge(healthy, cache), embedder) == {"ok": len(ITEMS)}
    return len(healthy.requests)


@pytest.mark.parametrize(
    ("script", "statuses", "requests", "rerun_requests"),
    [
        pytest.param([Reply(500, "internal error", headers=FAST)], {"ok": 3}, 4, 0, id="500-then-ok"),
        pytest.param([Reply(action=DROP)], {"ok": 3}, 4, 0, id="connection-dropped-then-ok"),
        pytest.param(
            [Reply(200, "Sure! Here it is:"), Reply(200, "{not json")],
            {"ok": 2, "unmeasured": 1},
            4,
            1,
            id="invalid-json-twice",
        ),
        pytest.param(
            [Reply(200, '{"statements": [', "length")] * 2, {"ok": 2, "unmeasured": 1}, 4, 1, id="truncated-twice"
        ),
    ],
)
def test_faults_that_do_not_stop_the_run(embedder, script, statuses, requests, rerun_requests):
    cache = LLMCallCache()
    with FakeOpenAIServer(script, default=GOOD) as server:
        assert _statuses(_judge(server, cache), embedder) == statuses
    assert len(server.requests) == requests
    # An unmeasured item's reply was not cached: the rerun asks again for it, and only for it.
    assert _rerun_requests(cache, embedder) == rerun_requests


def test_a_429_waits_for_retry_after_then_scores(embedder):
    with FakeOpenAIServer([Reply(429, "rate limited", headers={"Retry-After": "1"})], default=GOOD) as server:
        started = time.monotonic()
        assert _statuses(_judge(server, LLMCallCache()), embedder) == {"ok": 3}
        waited = time.monotonic() - started
    assert len(server.requests) == 4
    assert waited >= 1.0  # the server's Retry-After, not the client's own shorter backoff


def _failing_run(server: FakeOpenAIServer, cache: LLMCallCache, embedder, **settings) -> str:
    with pytest.raises(LLMUnavailable) as raised:
        _statuses(_judge(server, cache, **settings), embedder)
    message = str(raised.value)
    assert server.base_url in message
    return message


def test_a_server_that_keeps_answering_500_stops_the_run_after_its_retries(embedder, tmp_path):
    cache = LLMCallCache(tmp_path / "calls.sqlite")
    with FakeOpenAIServer(default=Reply(500, "internal error", headers=FAST)) as server:
        message = _failing_run(server, cache, embedder, max_retries=2)
    assert "HTTP 500 (internal error) after 3 attempts" in message
    assert (
        f"0 finished call(s) are kept in the call cache {tmp_path / 'calls.sqlite'} and 2 call(s) were not sent"
        in message
    )
    assert len(server.requests) == 3  # one call's 3 attempts; the other items were not sent to a failing server
    assert _rerun_requests(LLMCallCache(tmp_path / "calls.sqlite"), embedder) == 3


def test_a_hanging_server_fails_after_timeout_times_attempts(embedder):
    cache = LLMCallCache()
    with FakeOpenAIServer(default=Reply(action=HANG)) as server:
        started = time.monotonic()
        message = _failing_run(server, cache, embedder, timeout_s=0.5, max_retries=1)
        elapsed = time.monotonic() - started
    assert "did not answer within 0.5 s after 2 attempts" in message
    assert "in-memory call cache" in message  # says the kept calls will not survive this process
    # One call's 2 attempts, then the run stops: the other items are never sent to a hanging server.
    assert len(server.requests) == 2 and elapsed < 60


def test_a_connection_refused_mid_run_keeps_what_finished_and_a_rerun_resumes(embedder):
    cache = LLMCallCache()
    with FakeOpenAIServer([GOOD, Reply(action=REFUSE)]) as server:
        message = _failing_run(server, cache, embedder, max_retries=1)
    assert "did not answer: connection failed" in message and "after 2 attempts" in message
    assert "1 finished call(s) are kept" in message and "1 call(s) were not sent" in message
    assert len(server.requests) == 2  # the retry found nothing listening
    assert _rerun_requests(cache, embedder) == 2


def test_calls_in_flight_when_another_fails_still_finish_and_are_cached(embedder):
    cache = LLMCallCache()
    slow_answer = Reply(200, GOOD.content, delay_s=1.0)
    with FakeOpenAIServer([slow_answer], default=Reply(500, "overloaded", headers=FAST)) as server:
        _failing_run(server, cache, embedder, concurrency=2, max_retries=1)
    assert len(cache) == 1  # the slow call ended after the other had failed for good, and was kept
    assert _rerun_requests(cache, embedder) == 2


def test_a_refused_request_is_not_retried_and_stops_the_run(embedder):
    with FakeOpenAIServer(default=Reply(400, "maximum context length is 2048 tokens")) as server:
        with pytest.raises(LLMMisconfigured, match=r"HTTP 400, not retried\): maximum context length"):
            _statuses(_judge(server, LLMCallCache()), embedder)
    assert len(server.requests) == 1


# --- HTTP 200 without a chat completion: a proxy's sign-in page, a gateway's JSON error ------------

PAGE = "<!doctype html><html><head><title>Sign in</title></head><body>Sign in to continue</body></html>"
NOT_A_COMPLETION = {
    "html-page": (Reply(200, raw_body=PAGE, content_type="text/html; charset=utf-8"), "an HTML page"),
    "html-labelled-json": (Reply(200, raw_body=PAGE), "an HTML page"),
    "no-choices": (
        Reply(200, raw_body=json.dumps({"id": "x", "object": "chat.completion", "choices": []})),
        "no choices",
    ),
    "error-object": (
        Reply(200, raw_body=json.dumps({"error": {"message": "upstream model overloaded"}})),
        "upstream model overloaded",
    ),
    "json-array": (Reply(200, raw_body="[]"), "not an object, no choices"),
}


@pytest.mark.parametrize("case", list(NOT_A_COMPLETION))
def test_a_200_without_a_completion_is_retried_then_stops_the_run_naming_the_url(embedder, case):
    reply, says = NOT_A_COMPLETION[case]
    with FakeOpenAIServer(default=reply) as server:
        message = _failing_run(server, LLMCallCache(), embedder, max_retries=1)
    assert "HTTP 200 without a chat completion" in message and says in message, message
    assert "after 2 attempts" in message and "2 call(s) were not sent" in message
    assert len(server.requests) == 2  # retried like a server fault, and nothing more sent to it


def test_a_200_without_a_completion_once_is_retried_and_scored(embedder):
    reply, _ = NOT_A_COMPLETION["html-page"]
    with FakeOpenAIServer([reply], default=GOOD) as server:
        assert _statuses(_judge(server, LLMCallCache()), embedder) == {"ok": 3}
    assert len(server.requests) == 4


def test_evaluate_with_a_server_answering_html_exits_2_in_one_line(tmp_path):
    rag_eval = str(Path(sys.executable).parent / "rag-eval")
    item = ITEMS[0]
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps({"question": item.question, "answer": item.answer, "contexts": [item.contexts[0]["text"]]}) + "\n"
    )
    reply, _ = NOT_A_COMPLETION["html-page"]
    with FakeOpenAIServer(default=reply) as server:
        completed = subprocess.run(
            [
                rag_eval,
                "evaluate",
                "--input",
                str(source),
                "--out",
                str(tmp_path / "out.jsonl"),
                "--metrics",
                "faithfulness",
                "--judge",
                "llm",
                "--base-url",
                server.base_url,
                "--model",
                "fake",
                "--max-retries",
                "1",
                "--cache",
                "",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "w")},
            timeout=300,
        )
    assert completed.returncode == 2
    [line] = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert f"judge server at {server.base_url}" in line and "an HTML page" in line, completed.stderr
    assert "Traceback" not in completed.stderr and not (tmp_path / "out.jsonl").exists()
