"""Structured calls to any OpenAI-compatible server, made cheap and safe for judging.

- Schema-guided output: `json_schema` (vLLM, OpenAI) or `json_object` with a `schema` (llama.cpp server).
- Every reply is validated against its pydantic model; a truncated reply (finish_reason "length") or
  an invalid one is retried once, then reported as a failure with the reason, never scored.
- An unreachable server is retried with bounded backoff, then raises `JudgeUnavailable` naming the URL.
- Replies are cached by request content, so re-runs make no call; token usage is counted per call kind.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import openai
from pydantic import BaseModel, ValidationError

from rag_eval_pipeline.evaluation.judge_cache import JudgeCache, request_key

RESPONSE_FORMATS = ("json_schema", "json_object_schema")


class JudgeUnavailable(RuntimeError):
    """The judge server could not be reached: the run must stop rather than score without it."""


class JudgeMisconfigured(RuntimeError):
    """The server refused the request itself (wrong model, unsupported response_format, prompt too long)."""


# Worth retrying: the server is starting, overloaded or restarting. Other errors will not go away.
_TRANSIENT_STATUS = {502, 503, 504}


@dataclass(frozen=True)
class LLMSettings:
    base_url: str
    model: str
    api_key: str = "not-needed"
    temperature: float = 0.0
    seed: int = 7
    max_tokens: int = 768
    timeout_s: float = 120.0
    response_format: str = "json_schema"
    concurrency: int = 4
    connect_attempts: int = 4
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {RESPONSE_FORMATS}, got {self.response_format!r}")
        if not self.base_url or not self.model:
            raise ValueError("an LLM judge or generator needs a base URL and a model name (--base-url and --model, or RAG_EVAL_JUDGE_BASE_URL and RAG_EVAL_JUDGE_MODEL)")


@dataclass
class CallResult:
    parsed: BaseModel | None
    failure: str = ""
    usage: dict[str, int] = field(default_factory=dict)


class StructuredLLM:
    def __init__(self, settings: LLMSettings, cache: JudgeCache | None = None):
        self.settings = settings
        self.cache = cache if cache is not None else JudgeCache()  # an empty cache is falsy
        self._client: openai.AsyncOpenAI | None = None

    def open(self) -> None:
        """A client for the running event loop (each asyncio.run needs its own)."""
        self._client = openai.AsyncOpenAI(
            base_url=self.settings.base_url, api_key=self.settings.api_key, timeout=self.settings.timeout_s, max_retries=0
        )

    async def call(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> CallResult:
        request = self._request(kind, messages, schema)
        key = request_key(request)
        usage = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0}
        cached = self.cache.get(key)
        if cached is not None:
            usage["cache_hits"] = 1
            return CallResult(schema.model_validate_json(cached[0]), "", usage)
        failure = ""
        for attempt in range(2):  # one retry for a truncated or invalid reply
            if attempt:
                usage["retries"] += 1
                request = self._retry_request(request, failure)
            response = await self._create(request)
            usage["calls"] += 1
            if response.usage:
                usage["prompt_tokens"] += response.usage.prompt_tokens or 0
                usage["completion_tokens"] += response.usage.completion_tokens or 0
            choice = response.choices[0]
            content = choice.message.content or ""
            if choice.finish_reason == "length":
                failure = f"reply truncated at max_tokens={request['max_tokens']}"
                continue
            try:
                # strict=False: llama.cpp's grammar lets raw newlines into JSON strings.
                parsed = schema.model_validate(json.loads(content, strict=False))
            except json.JSONDecodeError as error:
                failure = f"reply is not valid JSON ({error.msg} at character {error.pos})"
                continue
            except ValidationError as error:
                failure = f"reply does not match the {kind} schema: {_first_error(error)}"
                continue
            self.cache.put(key, parsed.model_dump_json(), usage["prompt_tokens"], usage["completion_tokens"])
            return CallResult(parsed, "", usage)
        return CallResult(None, f"{failure} (after one retry)", usage)

    def _request(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> dict:
        json_schema = schema.model_json_schema()
        if self.settings.response_format == "json_schema":
            response_format = {"type": "json_schema", "json_schema": {"name": kind, "schema": json_schema, "strict": True}}
        else:
            response_format = {"type": "json_object", "schema": json_schema}
        return {
            "model": self.settings.model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "seed": self.settings.seed,
            "max_tokens": self.settings.max_tokens,
            "response_format": response_format,
        }

    @staticmethod
    def _retry_request(request: dict, failure: str) -> dict:
        retry = dict(request)
        if failure.startswith("reply truncated"):
            retry["max_tokens"] = request["max_tokens"] * 2
        else:
            reminder = {"role": "user", "content": "Reply with one JSON object that follows the schema exactly."}
            retry["messages"] = [*request["messages"], reminder]
        return retry

    async def _create(self, request: dict):
        delay = self.settings.backoff_s
        for attempt in range(1, self.settings.connect_attempts + 1):
            try:
                return await self._client.chat.completions.create(**request)
            except openai.APIStatusError as error:
                if error.status_code not in _TRANSIENT_STATUS:
                    raise JudgeMisconfigured(
                        f"judge server at {self.settings.base_url} refused the request (HTTP {error.status_code}): "
                        f"{_server_message(error)}"
                        + (" - for a llama.cpp server use response_format 'json_object_schema'"
                           if "json_object" in _server_message(error) else "")
                    ) from error
                if attempt == self.settings.connect_attempts:
                    raise JudgeUnavailable(
                        f"judge server at {self.settings.base_url} kept failing (HTTP {error.status_code}) "
                        f"after {attempt} attempts"
                    ) from error
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                if attempt == self.settings.connect_attempts:
                    raise JudgeUnavailable(
                        f"judge server at {self.settings.base_url} did not answer after {attempt} attempts: "
                        f"{type(error).__name__}: {error}"
                    ) from error
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body if isinstance(error.body, dict) else {}
    message = body.get("message") or (body.get("error") or {}).get("message") if body else None
    return str(message or error.message)[:300]


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "reply"
    return f"{where}: {first.get('msg', 'invalid')}"

