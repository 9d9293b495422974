"""Real calls to a local llama.cpp server; SmolLM2-135M is a plumbing stand-in, so only shapes are checked."""

from __future__ import annotations

import json
import os
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field

from rag_eval_pipeline_tests.support.local_llm_server import LocalLlamaServer, LocalServerError, smollm2_model_path

pytestmark = [pytest.mark.llm]

MESSAGES = [
    {"role": "system", "content": "You are a strict grader. Answer only with JSON."},
    {
        "role": "user",
        "content": "Context: Paris is the capital of France.\nClaim: Paris is the capital of France.\nIs the claim supported?",
    },
]


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: Literal["supported", "unsupported"]
    reason: str = Field(max_length=120)  # the server turns maxLength into grammar: no runaway strings


SCHEMA = Verdict.model_json_schema()


def _client(server: LocalLlamaServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=120)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_model_ships_in_a_package():
    path = smollm2_model_path()
    assert path.is_file() and path.suffix == ".gguf"


def test_chat_completion_through_openai_client(llama_server):
    assert llama_server.base_url.startswith("http://127.0.0.1:") and llama_server.base_url.endswith("/v1")
    response = _client(llama_server).chat.completions.create(
        model=llama_server.model, messages=MESSAGES, temperature=0, seed=7, max_tokens=40
    )
    choice = response.choices[0]
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert response.model == llama_server.model
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0


def test_json_object_with_schema_follows_the_schema(llama_server):
    response = _client(llama_server).chat.completions.create(
        model=llama_server.model,
        messages=MESSAGES,
        temperature=0,
        seed=7,
        max_tokens=200,
        response_format={"type": "json_object", "schema": SCHEMA},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    data = json.loads(choice.message.content)
    assert set(data) == {"verdict", "reason"}
    assert data["verdict"] in ("supported", "unsupported")
    Verdict.model_validate_json(choice.message.content)


def test_same_seed_and_temperature_zero_repeat_exactly(llama_server):
    client = _client(llama_server)
    request = {
        "model": llama_server.model,
        "messages": MESSAGES,
        "temperature": 0,
        "seed": 7,
        "max_tokens": 200,
        "response_format": {"type": "json_object", "schema": SCHEMA},
    }
    first = client.chat.completions.create(**request).choices[0].message.content
    second = client.chat.completions.create(**request).choices[0].message.content
    assert first == second


def test_tiny_max_tokens_reports_length(llama_server):
    response = _client(llama_server).chat.completions.create(
        model=llama_server.model,
        messages=MESSAGES,
        temperature=0,
        max_tokens=3,
        response_format={"type": "json_object", "schema": SCHEMA},
    )
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_json_schema_response_format_is_rejected_with_500(llama_server):
    # llama-cpp-python's server only knows "text" and "json_object" (+ "schema"); its request
    # validation error comes back as HTTP 500, which the openai client raises as InternalServerError.
    with pytest.raises(openai.InternalServerError) as raised:
        _client(llama_server).chat.completions.create(
            model=llama_server.model,
            messages=MESSAGES,
            max_tokens=50,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True},
            },
        )
    assert raised.value.status_code == 500
    assert "json_object" in str(raised.value)


def test_killed_server_gives_connection_error():
    with LocalLlamaServer(n_ctx=512) as server:
        client = _client(server)
        assert client.models.list().data[0].id == server.model
        server.kill()
        assert not server.running
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model=server.model, messages=MESSAGES, max_tokens=5)


def test_stop_leaves_no_process_and_is_idempotent():
    server = LocalLlamaServer(n_ctx=512).start()
    pid = server.pid
    assert pid is not None and not _gone(pid)
    log_path = server.log_path
    server.stop()
    server.stop()
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # nothing left in its process group either
    assert not log_path.exists()  # the temp dir with the log is removed


def test_startup_failure_names_the_log(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    server = LocalLlamaServer(bogus, log_dir=tmp_path, startup_timeout_s=60)
    with pytest.raises(LocalServerError, match="exited with code"):
        server.start()
    assert _gone(server.pid)
