"""Structured calls to any OpenAI-compatible server, made cheap and safe for judging.

- Schema-guided output: `json_schema` (vLLM, OpenAI) or `json_object` with a `schema` (llama.cpp server).
- Every reply is validated against its pydantic model; a truncated reply (finish_reason "length") or
  an invalid one is retried once, then reported as a failure with the reason, never scored.
- Server trouble that may pass (HTTP 408, 409, 429, 5xx, a refused or dropped connection, a timeout)
  is retried by the openai client itself, with jittered exponential backoff that honours Retry-After.
  Other refusals (400, 401, 404, 422, ...) are not retried: `LLMMisconfigured`.
- An HTTP 200 that is no chat completion (a proxy's HTML page, a gateway's JSON error without
  choices) is server trouble too: retried here with the same backoff, `max_retries` times.
- When a call still fails, no new call is sent, the calls in flight run to their end (and are
  cached), then the run stops with `LLMUnavailable` naming the URL, the last error, the attempts
  made and how many calls were kept, so a rerun with the same cache repeats only the rest.
- Replies are cached by request content, so re-runs make no call; token usage is counted per call kind.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from rag_eval_pipeline.core.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RESPONSE_FORMAT,
    DEFAULT_TIMEOUT_S,
    NO_API_KEY,
    RESPONSE_FORMATS,
)
from rag_eval_pipeline.core.llm.cache import LLMCallCache, request_key

if TYPE_CHECKING:  # openai costs about a second to import: only the LLM paths, not every run, pay for it
    import openai
    from openai.types.chat import ChatCompletion


class LLMUnavailable(RuntimeError):
    """The judge server could not be reached: the run must stop rather than score without it."""


class LLMMisconfigured(RuntimeError):
    """The server refused the request itself (wrong model, unsupported response_format, prompt too long)."""


class _NotSent(Exception):
    """A call skipped because another one already failed for good: the run is stopping."""


RETRY_REMINDER = "Reply with one JSON object that follows the schema exactly."


@dataclass(frozen=True)
class LLMSettings:
    base_url: str
    model: str
    api_key: str = NO_API_KEY
    temperature: float = 0.0
    seed: int = 7
    max_tokens: int = 768
    timeout_s: float = DEFAULT_TIMEOUT_S  # per attempt of one call
    response_format: str = DEFAULT_RESPONSE_FORMAT
    concurrency: int = DEFAULT_CONCURRENCY
    max_retries: int = DEFAULT_MAX_RETRIES  # per call, on top of the first attempt

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {RESPONSE_FORMATS}, got {self.response_format!r}")
        if not self.base_url or not self.model:
            raise ValueError(
                "an LLM judge or generator needs a base URL and a model name (--base-url and --model, or RAG_EVAL_JUDGE_BASE_URL and RAG_EVAL_JUDGE_MODEL)"
            )
        if not (isinstance(self.timeout_s, (int, float)) and math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(
                f"timeout_s (--timeout-s, RAG_EVAL_JUDGE_TIMEOUT_S) must be a number of seconds > 0, got {self.timeout_s!r}"
            )
        if not (isinstance(self.max_retries, int) and self.max_retries >= 0):
            raise ValueError(
                f"max_retries (--max-retries, RAG_EVAL_JUDGE_MAX_RETRIES) must be an integer >= 0, got {self.max_retries!r}"
            )
        if not (isinstance(self.concurrency, int) and self.concurrency >= 1):
            raise ValueError(
                f"concurrency (--concurrency, RAG_EVAL_JUDGE_CONCURRENCY) must be an integer >= 1, got {self.concurrency!r}"
            )


@dataclass
class CallResult:
    parsed: BaseModel | None
    failure: str = ""
    usage: dict[str, int] = field(default_factory=dict)


class StructuredLLM:
    def __init__(self, settings: LLMSettings, cache: LLMCallCache | None = None):
        self.settings = settings
        self.cache = cache if cache is not None else LLMCallCache()  # an empty cache is falsy
        self._client: openai.AsyncOpenAI | None = None
        self._start_run()

    def open(self) -> None:
        """A client for the running event loop (each asyncio.run needs its own)."""
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=self.settings.base_url,
            api_key=self.settings.api_key,
            timeout=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )
        self._start_run()

    def _start_run(self) -> None:
        self._failure: LLMUnavailable | LLMMisconfigured | None = None  # the first call that failed for good
        self._kept = 0  # calls answered and stored in the cache since open()
        self._not_sent = 0  # calls skipped once a call had failed

    async def run_all(self, awaitables: Iterable[Awaitable]) -> list:
        """Every awaitable runs to its end, so each call that can still finish is cached; then the
        first server failure (with what was kept) or any other error is raised."""
        results = await asyncio.gather(*awaitables, return_exceptions=True)
        self.raise_failure()
        return _raise_first(results)

    def raise_failure(self) -> None:
        error = self._failure
        if error is None:
            return
        where = (
            f"the call cache {self.cache.path}"
            if self.cache.path
            else "the in-memory call cache, lost at exit (set a cache path to resume)"
        )
        note = (
            f"; {self._kept} finished call(s) are kept in {where} and {self._not_sent} call(s) were not sent "
            "after the failure: a rerun with the same cache sends only the calls that did not finish"
        )
        raise type(error)(f"{error}{note}").with_traceback(error.__traceback__) from error.__cause__

    async def call(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> CallResult:
        request = self._request(kind, messages, schema)
        key = request_key(request)
        usage = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0}
        cached = self.cache.get(key)
        if cached is not None:
            usage["cache_hits"] = 1
            return CallResult(schema.model_validate_json(cached[0]), "", usage)
        if self._failure is not None:  # the server already failed for good: do not queue more work on it
            self._not_sent += 1
            raise _NotSent(kind)
        try:
            return await self._ask(kind, request, key, schema, usage)
        except (LLMUnavailable, LLMMisconfigured) as error:
            self._failure = self._failure or error
            raise

    async def _ask(self, kind: str, request: dict, key: str, schema: type[BaseModel], usage: dict) -> CallResult:
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
            self._kept += 1
            return CallResult(parsed, "", usage)
        return CallResult(None, f"{failure} (after one retry)", usage)

    def _request(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> dict:
        json_schema = schema.model_json_schema()
        if self.settings.response_format == "json_schema":
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": kind, "schema": json_schema, "strict": True},
            }
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
            retry["messages"] = [*request["messages"], {"role": "user", "content": RETRY_REMINDER}]
        return retry

    async def _create(self, request: dict) -> ChatCompletion:
        """One chat completion; what may pass is retried (see the module docstring), an HTTP 200 without a
        completion here, like a server fault, and then LLMUnavailable."""
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                await asyncio.sleep(_backoff_s(attempt))
            try:
                response = await self._send(request)
            except json.JSONDecodeError as error:  # a body labelled JSON that is not
                problem = _body_problem(error.doc)
                continue
            problem = _completion_problem(response)
            if not problem:
                return response
        raise LLMUnavailable(
            f"judge server at {self.settings.base_url} kept answering HTTP 200 without a chat "
            f"completion ({problem}) {self._after(self.settings.max_retries + 1)}"
        )

    async def _send(self, request: dict):
        """One request, which the openai client retries on what may pass; its errors said in our terms."""
        import openai

        server = f"judge server at {self.settings.base_url}"
        if self._client is None:
            raise RuntimeError("StructuredLLM.open() was not called before sending")  # a bug of ours
        try:
            return await self._client.chat.completions.create(**request)
        except openai.APIStatusError as error:
            message, retried = _server_message(error), _is_retried(error.status_code)
            # llama.cpp's server answers an unsupported response_format with a 500: retried, yet our mistake.
            hint = (
                " - for a llama.cpp server use response_format 'json_object_schema'" if "json_object" in message else ""
            )
            if retried and not hint:
                raise LLMUnavailable(
                    f"{server} kept failing: HTTP {error.status_code} ({message}) {self._attempts(error)}"
                ) from error
            raise LLMMisconfigured(
                f"{server} refused the request (HTTP {error.status_code}, "
                f"{self._attempts(error) if retried else 'not retried'}): {message}{hint}"
            ) from error
        except openai.APITimeoutError as error:
            raise LLMUnavailable(
                f"{server} did not answer within {self.settings.timeout_s:g} s {self._attempts(error)}"
            ) from error
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            raise LLMUnavailable(
                f"{server} did not answer: connection failed ({type(cause).__name__}: {cause}) {self._attempts(error)}"
            ) from error

    def _attempts(self, error: openai.APIError) -> str:
        """How many requests this call made: the openai client numbers its retries in a request header."""
        taken = error.request.headers.get("x-stainless-retry-count", "") if error.request is not None else ""
        return self._after(int(taken) + 1 if taken.isdigit() else f"up to {self.settings.max_retries + 1}")

    def _after(self, made: int | str) -> str:
        made = f"{made} attempt" + ("" if made == 1 else "s")
        return (
            f"after {made} (max_retries {self.settings.max_retries}, timeout {self.settings.timeout_s:g} s per attempt)"
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


async def settle(awaitables: Iterable[Awaitable]) -> list:
    """Await every one to its end (a failing sibling does not orphan the others), then raise the first error."""
    return _raise_first(await asyncio.gather(*awaitables, return_exceptions=True))


def _raise_first(results: list) -> list:
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _is_retried(status: int) -> bool:
    """The statuses the openai client retries: the server is busy, restarting or failing for now."""
    return status in (408, 409, 429) or status >= 500


def _backoff_s(attempt: int) -> float:
    """The openai client's own schedule: 0.5 s doubling up to 8 s, less up to a quarter at random."""
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (1 - 0.25 * random.random())


def _completion_problem(response) -> str:
    """What an HTTP 200 reply lacks to be a chat completion; '' when it is one."""
    from openai.types.chat import ChatCompletion

    if not isinstance(response, ChatCompletion):
        # The openai client hands back the text of a body it could not read as JSON.
        return (
            _body_problem(response) if isinstance(response, str) else "a JSON value that is not an object, no choices"
        )
    error = (response.model_extra or {}).get("error")
    if error:
        return f"an error: {_said(error.get('message') if isinstance(error, dict) else error)}"
    if not response.choices:
        return "no choices"
    if response.choices[0] is None or response.choices[0].message is None:
        return "a choice without a message"
    return ""


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


def _body_problem(body: str) -> str:
    start = body.lstrip()[:1000]
    if not start:
        return "an empty body"
    if re.match(r"<(!doctype\s+html|html)\b", start, re.I):
        title = _TITLE.search(body[:5000])
        return (
            "an HTML page"
            + (f" titled {_said(title.group(1))}" if title else "")
            + ": a proxy's page, or a base URL that is not the OpenAI-compatible API"
        )
    return f"a body that is not JSON: {_said(start)}"


def _said(text) -> str:
    """A server's words, on one line and short."""
    return repr(" ".join(str(text).split())[:200])


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body if isinstance(error.body, dict) else {}
    message = body.get("message") or (body.get("error") or {}).get("message") if body else None
    return str(message or error.message)[:300]


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "reply"
    return f"{where}: {first.get('msg', 'invalid')}"
