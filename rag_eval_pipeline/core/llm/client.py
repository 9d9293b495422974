"""Structured calls to any OpenAI-compatible server, made cheap and safe for judging.

- Schema-guided output: `json_schema` (vLLM, OpenAI) or `json_object` with a `schema` (llama.cpp server).
- Every reply is validated against its pydantic model; a truncated reply (finish_reason "length") or
  an invalid one is retried once, then reported as a failure with the reason, never scored.
- Back-pressure (HTTP 429, 503: a rate limit, a server loading or full) is retried for as long as the
  call's rate-limit budget lasts, waiting what Retry-After (or retry-after-ms) asks, at most a minute at
  a time, else a jittered exponential backoff. Other server trouble that may pass (HTTP 408, 409, other
  5xx, a refused or dropped connection, a timeout, an HTTP 200 that is no chat completion: a proxy's
  HTML page, a gateway's JSON error) is retried `max_retries` times with the same waits. Other refusals
  (400, 401, 404, 422, ...) are not retried: `LLMMisconfigured`. The retries are ours, not the openai
  client's, so both limits and every message count the same attempts.
- Several base URLs (replicas of one model) take the requests in turn, one client each; a retry goes
  to the next replica. `cache_salt` (vLLM's prefix-cache isolation) and `priority` (vLLM's priority
  scheduling) go with every request when set, never into the call cache's key.
- When a call still fails, no new call is sent, the calls in flight run to their end (and are
  cached), then the run stops with `LLMUnavailable` naming the URL, the last error, the attempts
  made and how many calls were kept, so a rerun with the same cache repeats only the rest.
- Replies are cached by request content, so re-runs make no call; token usage is counted per call kind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import email.utils
import itertools
import json
import math
import random
import re
import time
from collections.abc import Awaitable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RATE_LIMIT_BUDGET_S,
    DEFAULT_RESPONSE_FORMAT,
    DEFAULT_TIMEOUT_S,
    MAX_RETRY_AFTER_S,
    NO_API_KEY,
    RESPONSE_FORMATS,
)
from rag_eval_pipeline.core.llm.cache import LLMCallCache, request_key

T = TypeVar("T")

if TYPE_CHECKING:  # openai costs about a second to import: only the LLM paths, not every run, pay for it
    import httpx2
    import openai
    from openai.types.chat import ChatCompletion


class LLMUnavailable(RuntimeError):
    """The judge server could not be reached: the run must stop rather than score without it."""


class LLMMisconfigured(RuntimeError):
    """The server refused the request itself (wrong model, unsupported response_format, prompt too long)."""


class _NotSent(Exception):
    """A call skipped because another one already failed for good: the run is stopping."""


RETRY_REMINDER = "Reply with one JSON object that follows the schema exactly."
BACK_PRESSURE = (429, 503)  # retried within the rate-limit budget, not counted against max_retries


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | Sequence[str]  # one URL, several comma-separated, or a list: replicas of one model
    model: str
    api_key: str = NO_API_KEY
    temperature: float = 0.0
    seed: int = 7
    max_tokens: int = 768
    timeout_s: float = DEFAULT_TIMEOUT_S  # per attempt of one call
    response_format: str = DEFAULT_RESPONSE_FORMAT
    concurrency: int = DEFAULT_CONCURRENCY
    max_retries: int = DEFAULT_MAX_RETRIES  # per call, on top of the first attempt; back-pressure aside
    rate_limit_budget_s: float = DEFAULT_RATE_LIMIT_BUDGET_S  # per call, for retrying HTTP 429 and 503
    cache_salt: str | None = None  # vLLM: requests with other salts never share prefix-cache blocks
    priority: int | None = None  # vLLM's priority scheduling (lower first); None: not sent

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {RESPONSE_FORMATS}, got {self.response_format!r}")
        if not self.base_urls or not self.model:
            raise ValueError(
                "an LLM judge or generator needs a base URL and a model name (--base-url and --model, or RAG_EVAL_JUDGE_BASE_URL and RAG_EVAL_JUDGE_MODEL)"
            )
        if not _is_seconds(self.timeout_s, above=0):
            raise ValueError(
                f"timeout_s (--timeout-s, RAG_EVAL_JUDGE_TIMEOUT_S) must be a number of seconds > 0, got {self.timeout_s!r}"
            )
        if not _is_seconds(self.rate_limit_budget_s, above=None):
            raise ValueError(
                "rate_limit_budget_s (--rate-limit-budget-s, RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S) must be a number "
                f"of seconds >= 0, got {self.rate_limit_budget_s!r}"
            )
        if not (isinstance(self.max_retries, int) and self.max_retries >= 0):
            raise ValueError(
                f"max_retries (--max-retries, RAG_EVAL_JUDGE_MAX_RETRIES) must be an integer >= 0, got {self.max_retries!r}"
            )
        if not (isinstance(self.concurrency, int) and self.concurrency >= 1):
            raise ValueError(
                f"concurrency (--concurrency, RAG_EVAL_JUDGE_CONCURRENCY) must be an integer >= 1, got {self.concurrency!r}"
            )
        if self.priority is not None and not (isinstance(self.priority, int) and not isinstance(self.priority, bool)):
            raise ValueError(
                f"priority (--priority, RAG_EVAL_JUDGE_PRIORITY) must be an integer, got {self.priority!r}"
            )

    @property
    def base_urls(self) -> tuple[str, ...]:
        """The replicas, in the order they take requests."""
        urls = self.base_url.split(",") if isinstance(self.base_url, str) else self.base_url
        return tuple(url.strip() for url in urls if url.strip())

    def extra_body(self) -> dict:
        """The vLLM fields sent beside the request, only those set (other servers ignore unknown fields)."""
        extra = {"cache_salt": self.cache_salt, "priority": self.priority}
        return {name: value for name, value in extra.items() if value is not None}


def _is_seconds(value, above: float | None) -> bool:
    """A finite number of seconds, > above (None: >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return value > above if above is not None else value >= 0


@dataclass
class CallResult:
    parsed: BaseModel | None
    failure: str = ""
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class _Failed:
    """One attempt that did not bring a chat completion, and what it says about trying again."""

    server: str  # "judge server at <url>"
    what: str  # what went wrong, said after the server
    status: int | None = None
    retry_after_s: float | None = None  # what the server asked to wait
    retried: bool = True
    error: BaseException | None = None

    @property
    def back_pressure(self) -> bool:
        return self.status in BACK_PRESSURE


@dataclass
class _Tries:
    """One call's attempts so far: back-pressure waits are bounded by time, other faults by count."""

    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    faults: int = 0
    waits: int = 0

    def spent_s(self) -> float:
        return time.monotonic() - self.started


class StructuredLLM:
    def __init__(self, settings: LLMSettings, cache: LLMCallCache | None = None):
        self.settings = settings
        self.cache = cache if cache is not None else LLMCallCache()  # an empty cache is falsy
        self._clients: list[tuple[str, openai.AsyncOpenAI]] = []
        self._turn = itertools.count()
        self._start_run()

    def open(self) -> None:
        """One client per replica, for the running event loop (each asyncio.run needs its own)."""
        import openai

        tracing.instrument_openai()  # with tracing on: each request an LLM span (imports openai: done above)

        self._clients = [
            (
                url,
                openai.AsyncOpenAI(
                    base_url=url,
                    api_key=self.settings.api_key,
                    timeout=self.settings.timeout_s,
                    max_retries=0,  # retried by _create, which knows back-pressure from faults
                ),
            )
            for url in self.settings.base_urls
        ]
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
        """One structured call under a span of its own (core/tracing.py): what was asked and answered, the
        tokens, whether the cache answered, the retries. The openai client's own LLM spans nest under it."""
        attributes = {
            "rag_eval.call_kind": kind,
            "llm.model_name": self.settings.model,
            "input.value": messages[-1]["content"],
        }
        with tracing.span(f"{kind} call", tracing.CHAIN, attributes) as current:
            result = await self._call(kind, messages, schema)
            tracing.set_attributes(
                current,
                {
                    "output.value": result.parsed.model_dump_json() if result.parsed is not None else result.failure,
                    "rag_eval.cache_hit": bool(result.usage.get("cache_hits")),
                    "rag_eval.retries": result.usage.get("retries", 0),
                    "rag_eval.prompt_tokens": result.usage.get("prompt_tokens", 0),
                    "rag_eval.completion_tokens": result.usage.get("completion_tokens", 0),
                },
            )
        return result

    async def _call(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> CallResult:
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
        """What is sent and what the cache key hashes: neither the replica nor the vLLM extras are in it,
        so replicas of one model share their replies."""
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
        """One chat completion, retried as the module docstring says; then LLMUnavailable."""
        tries = _Tries()
        while True:
            tries.attempts += 1
            outcome = await self._send(request)
            if not isinstance(outcome, _Failed):
                return outcome
            wait_s = self._wait_before_retry(outcome, tries)
            if self._failure is not None:  # another call failed for good: the run stops, this retry is not sent
                self._not_sent += 1
                raise _NotSent("a retry")
            await asyncio.sleep(wait_s)

    def _wait_before_retry(self, failed: _Failed, tries: _Tries) -> float:
        """Seconds to wait before the next attempt; LLMUnavailable (or LLMMisconfigured) when there is none."""
        if not failed.retried:
            raise LLMMisconfigured(f"{failed.server} {failed.what}") from failed.error
        if failed.back_pressure:
            tries.waits += 1
            wait_s = _wait_s(failed.retry_after_s, tries.waits)
            if tries.spent_s() + wait_s > self.settings.rate_limit_budget_s:
                raise LLMUnavailable(self._budget_spent(failed, tries)) from failed.error
            return wait_s
        tries.faults += 1
        if tries.faults > self.settings.max_retries:
            raise LLMUnavailable(f"{failed.server} {failed.what} {self._after(tries.attempts)}") from failed.error
        return _wait_s(failed.retry_after_s, tries.faults)

    def _budget_spent(self, failed: _Failed, tries: _Tries) -> str:
        made = f"{tries.attempts} attempt" + ("" if tries.attempts == 1 else "s")
        return (
            f"{failed.server} {failed.what}: the rate-limit budget of {self.settings.rate_limit_budget_s:g} s "
            f"per call is spent ({made} in {tries.spent_s():.1f} s; raise --rate-limit-budget-s or "
            "RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S, or lower --concurrency)"
        )

    def _replica(self) -> tuple[str, openai.AsyncOpenAI]:
        """The next replica in turn: calls, and the retries of a call, go round the base URLs."""
        if not self._clients:
            raise RuntimeError("StructuredLLM.open() was not called before sending")  # a bug of ours
        return self._clients[next(self._turn) % len(self._clients)]

    async def _send(self, request: dict) -> ChatCompletion | _Failed:
        """One request to the next replica: its chat completion, or what went wrong, said in our terms."""
        import openai

        url, client = self._replica()
        server = f"judge server at {url}"
        extra = self.settings.extra_body()
        try:
            response = await client.chat.completions.create(**request, extra_body=extra or None)
        except json.JSONDecodeError as error:  # a body labelled JSON that is not
            return _Failed(server, _not_a_completion(_body_problem(error.doc)), error=error)
        except openai.APIStatusError as error:
            return _status_failure(server, error)
        except openai.APITimeoutError as error:
            return _Failed(server, f"did not answer within {self.settings.timeout_s:g} s", error=error)
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            return _Failed(server, f"did not answer: connection failed ({type(cause).__name__}: {cause})", error=error)
        problem = _completion_problem(response)
        return _Failed(server, _not_a_completion(problem)) if problem else response

    def _after(self, made: int) -> str:
        attempts = f"{made} attempt" + ("" if made == 1 else "s")
        return (
            f"after {attempts} (max_retries {self.settings.max_retries}, "
            f"timeout {self.settings.timeout_s:g} s per attempt)"
        )

    async def close(self) -> None:
        clients, self._clients = self._clients, []
        for _, client in clients:
            await client.close()


def _status_failure(server: str, error: openai.APIStatusError) -> _Failed:
    """An HTTP error status: back-pressure, a fault that may pass, or a refusal (not retried)."""
    status, message = error.status_code, _server_message(error)
    # llama.cpp's server answers an unsupported response_format with a 500: a fault by its status, yet our mistake.
    hint = " - for a llama.cpp server use response_format 'json_object_schema'" if "json_object" in message else ""
    if hint or not _is_retried(status):
        return _Failed(
            server,
            f"refused the request (HTTP {status}, not retried): {message}{hint}",
            status,
            retried=False,
            error=error,
        )
    what = (
        f"kept answering HTTP {status} ({message})"
        if status in BACK_PRESSURE
        else f"kept failing: HTTP {status} ({message})"
    )
    return _Failed(server, what, status, _retry_after_s(error.response.headers), error=error)


def _not_a_completion(problem: str) -> str:
    return f"kept answering HTTP 200 without a chat completion ({problem})"


def _retry_after_s(headers: httpx2.Headers) -> float | None:
    """The wait a server asks for: retry-after-ms, or Retry-After in seconds or as an HTTP date; None if neither."""
    for name, unit_s in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, ""))
        except ValueError:
            continue
        if math.isfinite(value):
            return max(0.0, value * unit_s)
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after", ""))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is in GMT, even one that does not say so
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - time.time())


def _wait_s(retry_after_s: float | None, attempt: int) -> float:
    """What the server asked for, at most MAX_RETRY_AFTER_S at a time; else our backoff."""
    return min(retry_after_s, MAX_RETRY_AFTER_S) if retry_after_s is not None else _backoff_s(attempt)


def run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also where this thread's event loop is already running (a notebook, a service): there
    the coroutine runs on a loop of its own in a worker thread, and this thread waits for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:  # in this context: spans nest, tenant kept
        return worker.submit(contextvars.copy_context().run, asyncio.run, coroutine).result()


async def settle(awaitables: Iterable[Awaitable]) -> list:
    """Await every one to its end (a failing sibling does not orphan the others), then raise the first error."""
    return _raise_first(await asyncio.gather(*awaitables, return_exceptions=True))


def _raise_first(results: list) -> list:
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _is_retried(status: int) -> bool:
    """The statuses worth another attempt: the server is busy, restarting or failing for now."""
    return status in (408, 409, 429) or status >= 500


def _backoff_s(attempt: int) -> float:
    """The openai client's schedule: 0.5 s doubling up to 8 s, less up to a quarter at random."""
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
