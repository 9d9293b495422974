"""Rate limits and overload (HTTP 429, 503) are back-pressure: a call keeps retrying them within its
time budget, waiting what Retry-After asks, while other faults keep their count (`max_retries`).

Driven by the named FakeOpenAIServer. No test asserts how long a wait took, only generous upper bounds
that show a loop ends; counts of requests prove what was retried.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.defaults import DEFAULT_RATE_LIMIT_BUDGET_S, MAX_RETRY_AFTER_S
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
from rag_eval_pipeline.core.llm import client
from rag_eval_pipeline.core.llm.client import LLMMisconfigured, LLMSettings, LLMUnavailable, StructuredLLM
from rag_eval_pipeline.resources import EmbedderResource
from rag_eval_pipeline.resources.judge import JudgeResource
from rag_eval_pipeline.settings import SettingsError
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply

ITEM = EvalItem(
    "q1", "How long are API logs kept?", "API logs are kept for 90 days.", [{"id": "a", "text": "90 days."}]
)
GOOD = Reply(200, json.dumps({"statements": [{"statement": "API logs are kept for 90 days.", "verdict": 1}]}))
RATE_LIMITED = Reply(429, "rate limit reached", headers={"Retry-After": "1"})
NO_LOOP_S = 120  # far above any wait these tests script: only an endless retry loop would pass it


def _judge(server: FakeOpenAIServer, **settings) -> LLMJudge:
    return LLMJudge(StructuredLLM(LLMSettings(base_url=server.base_url, model="fake", concurrency=1, **settings)))


def _verdicts(judge: LLMJudge):
    [judgement] = judge.judge_many([ITEM], {ANSWER_STATEMENTS})
    assert isinstance(judgement.answer_statements, list), judgement.answer_statements
    return judgement.answer_statements


def test_five_429s_with_retry_after_then_an_answer_is_scored():
    with FakeOpenAIServer([RATE_LIMITED] * 5, default=GOOD) as server:
        started = time.monotonic()
        verdicts = _verdicts(_judge(server, max_retries=0))  # back-pressure does not spend max_retries
        elapsed = time.monotonic() - started
    assert [v.verdict for v in verdicts] == [1]
    assert len(server.requests) == 6
    assert elapsed < NO_LOOP_S


def test_endless_429s_stop_the_run_when_the_budget_is_spent_naming_it():
    with FakeOpenAIServer(default=RATE_LIMITED) as server:
        started = time.monotonic()
        with pytest.raises(LLMUnavailable) as raised:
            _verdicts(_judge(server, rate_limit_budget_s=2))
        elapsed = time.monotonic() - started
    message = str(raised.value)
    assert "\n" not in message
    assert f"judge server at {server.base_url} kept answering HTTP 429 (rate limit reached)" in message
    assert "rate-limit budget of 2 s per call is spent" in message and "RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S" in message
    attempts = len(server.requests)
    assert f"({attempts} attempts in " in message
    assert 2 <= attempts <= 3  # 1 s apart within 2 s: the waits follow Retry-After, not a fast backoff
    assert elapsed < NO_LOOP_S


def test_a_503_is_back_pressure_too_and_a_500_spends_max_retries():
    fast = {"retry-after-ms": "10"}
    with FakeOpenAIServer([Reply(503, "loading model", headers=fast)] * 3, default=GOOD) as server:
        assert [v.verdict for v in _verdicts(_judge(server, max_retries=0))] == [1]
    assert len(server.requests) == 4
    with FakeOpenAIServer([Reply(500, "internal error", headers=fast)] * 3, default=GOOD) as server:
        with pytest.raises(LLMUnavailable, match=r"HTTP 500 \(internal error\) after 2 attempts \(max_retries 1,"):
            _verdicts(_judge(server, max_retries=1))
    assert len(server.requests) == 2


def test_a_400_is_not_retried():
    with FakeOpenAIServer([Reply(400, "maximum context length is 2048 tokens")], default=GOOD) as server:
        with pytest.raises(LLMMisconfigured, match=r"HTTP 400, not retried\): maximum context length"):
            _verdicts(_judge(server))
    assert len(server.requests) == 1


def test_a_budget_of_zero_does_not_retry_a_429():
    with FakeOpenAIServer([RATE_LIMITED], default=GOOD) as server:
        with pytest.raises(LLMUnavailable, match="rate-limit budget of 0 s per call is spent"):
            _verdicts(_judge(server, rate_limit_budget_s=0))
    assert len(server.requests) == 1


def _headers(**values: str):
    import httpx2

    return httpx2.Headers({name.replace("_", "-"): value for name, value in values.items()})


def test_retry_after_is_read_in_seconds_milliseconds_or_as_a_date_and_capped():
    in_ten_s = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert client._retry_after_s(_headers(retry_after="3")) == 3.0
    assert client._retry_after_s(_headers(retry_after_ms="250", retry_after="3")) == 0.25
    from_date = client._retry_after_s(_headers(retry_after=in_ten_s))
    assert from_date is not None and 8 <= from_date <= 10
    assert client._retry_after_s(_headers(retry_after="Wed, 21 Oct 2015 07:28:00 GMT")) == 0.0  # past: no wait
    assert client._retry_after_s(_headers(retry_after="soon")) is None
    assert client._retry_after_s(_headers(retry_after="nan")) is None
    assert client._retry_after_s(_headers()) is None
    assert client._wait_s(3600.0, 1) == MAX_RETRY_AFTER_S  # a server asking for an hour is asked again sooner
    assert 0 < client._wait_s(None, 1) <= 0.5  # no Retry-After: our backoff


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, "5"])
def test_a_bad_budget_is_refused_naming_the_option(value):
    with pytest.raises(ValueError, match="rate_limit_budget_s"):
        LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", rate_limit_budget_s=value)


def test_the_budget_comes_from_the_environment():
    assert settings.load(environ={}).judge.rate_limit_budget_s == DEFAULT_RATE_LIMIT_BUDGET_S
    environ = {"RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S": "12.5", "RAG_EVAL_JUDGE_BASE_URL": "http://a:1/v1"}
    judge = settings.load(environ=environ).judge
    assert judge.rate_limit_budget_s == 12.5
    resource = JudgeResource.from_settings(judge, EmbedderResource(), cache_path="", environ={})
    assert resource.model_copy(update={"model": "m"}).llm_settings().rate_limit_budget_s == 12.5
    with pytest.raises(SettingsError, match="RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S must be at least 0(.0)?, got '-1'"):
        settings.load(environ={"RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S": "-1"})


@pytest.mark.cli
def test_evaluate_stops_in_one_line_when_the_budget_option_is_spent(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps({"question": ITEM.question, "answer": ITEM.answer, "contexts": ["90 days."]}) + "\n")
    rag_eval = str(Path(sys.executable).parent / "rag-eval")
    with FakeOpenAIServer(default=RATE_LIMITED) as server:
        completed = subprocess.run(
            [
                rag_eval,
                "evaluate",
                "--input",
                str(source),
                "--out",
                str(tmp_path / "scores.jsonl"),
                "--metrics",
                "faithfulness",
                "--judge",
                "llm",
                "--base-url",
                server.base_url,
                "--model",
                "fake",
                "--cache",
                "",
                "--rate-limit-budget-s",
                "1.5",
            ],
            env={**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")},
            capture_output=True,
            text=True,
            timeout=NO_LOOP_S,
        )
    assert completed.returncode == 2, completed.stderr
    [line] = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert "HTTP 429" in line and "rate-limit budget of 1.5 s per call is spent" in line
    assert not (tmp_path / "scores.jsonl").exists()
