"""OpenTelemetry traces of evaluations, exported over OTLP: off unless the standard variables configure it.

On when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and `OTEL_SDK_DISABLED`
is not `true`); the SDK reads the rest itself (`OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_EXPORTER_OTLP_TIMEOUT`, ...). Off, no OpenTelemetry SDK module is imported and every helper here is a
no-op whose ids are "". Spans leave in a background thread (a batch processor): a collector that does not
answer costs a run at most the exporter's timeout, when the run flushes at its end, and never fails it.

Spans follow the OpenInference conventions, so Phoenix renders them natively: `openinference.span.kind`
(CHAIN for a run and an item, RETRIEVER, EMBEDDING, LLM, EVALUATOR), `input.value`, `output.value`,
`retrieval.documents.*`, `llm.*` token counts; the openai client is instrumented by OpenInference's own
instrumentor when the LLM client first opens (`instrument_openai`), so each judge request is an LLM span too.

One project per tenant: spans started while `tenant_scope(tenant)` holds carry `rag_eval.tenant` and are
exported with the header `x-project-name: rag-eval-<tenant>` (Phoenix files a request under that project),
each tenant through an exporter of its own. Context crosses processes as a W3C `traceparent` string
(`traceparent()`, `attached(...)`): in a run's tags for the steps of a run on a worker, in each request
to a candidate's child process, so a candidate's own spans nest under its item.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TENANT_ATTRIBUTE = "rag_eval.tenant"
PROJECT_HEADER = "x-project-name"
PROJECT_PREFIX = "rag-eval-"
DEFAULT_PROJECT = "rag-eval"
TRACEPARENT_TAG = "rag_eval/traceparent"  # a run's tag: the span its steps nest under
FLUSH_TIMEOUT_MS = 10_000  # the OTLP exporter's default timeout

# OpenInference span kinds
CHAIN, RETRIEVER, EMBEDDING, LLM, EVALUATOR = "CHAIN", "RETRIEVER", "EMBEDDING", "LLM", "EVALUATOR"

_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("rag_eval_tenant", default="")
_lock = threading.Lock()
_provider: Any = None  # the process's TracerProvider once set up; None while off or not yet used


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return False
    return any(environ.get(variable, "").strip() for variable in ENDPOINT_VARIABLES)


def project_of(tenant: str) -> str:
    return PROJECT_PREFIX + tenant if tenant else DEFAULT_PROJECT


def _tracer():
    """The tracer of this process, set up on first use; None when tracing is off."""
    global _provider
    if not enabled():
        return None
    with _lock:
        if _provider is None:
            _provider = _set_up()
    # Our provider's own tracer, even where another provider was made the global one first (an app's, the
    # opentelemetry-instrument wrapper's): its routing keeps each tenant's spans in the tenant's project.
    return _provider.get_tracer("rag_eval_pipeline")


def _set_up():
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "rag-eval",
            "openinference.project.name": DEFAULT_PROJECT,
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(_by_tenant())
    trace.set_tracer_provider(provider)
    return provider


_instrumented = False


def instrument_openai() -> None:
    """Each request of the openai client becomes an LLM span of its own (OpenInference's instrumentation).
    Called by the LLM client when it first opens, not at set-up: it imports openai (about half a second),
    which an audit with the offline judge never needs."""
    global _instrumented
    if _instrumented or _tracer() is None:
        return
    with _lock:
        if not _instrumented:
            from openinference.instrumentation.openai import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=_provider)
            _instrumented = True


def _by_tenant():
    """A span processor that files each span under its tenant: the tenant of the context it started in is
    written on it, and it is exported, batched, by that tenant's exporter (header x-project-name)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class ByTenant(SpanProcessor):
        def __init__(self) -> None:
            self._processors: dict[str, BatchSpanProcessor] = {}
            self._lock = threading.Lock()

        def _processor(self, tenant: str) -> BatchSpanProcessor:
            with self._lock:
                if tenant not in self._processors:
                    headers = {**_environment_headers(), PROJECT_HEADER: project_of(tenant)}
                    self._processors[tenant] = BatchSpanProcessor(OTLPSpanExporter(headers=headers))
                return self._processors[tenant]

        def on_start(self, span, parent_context=None) -> None:
            if tenant := _tenant.get():
                span.set_attribute(TENANT_ATTRIBUTE, tenant)

        def on_end(self, span) -> None:
            self._processor(str((span.attributes or {}).get(TENANT_ATTRIBUTE, ""))).on_end(span)

        def shutdown(self) -> None:
            for processor in list(self._processors.values()):
                processor.shutdown()

        def force_flush(self, timeout_millis: int = FLUSH_TIMEOUT_MS) -> bool:
            deadline = time.monotonic() + timeout_millis / 1000  # one deadline for every tenant's exporter
            flushed = True
            for processor in list(self._processors.values()):
                left_ms = int((deadline - time.monotonic()) * 1000)
                flushed = left_ms > 0 and processor.force_flush(left_ms) and flushed
            return flushed

    return ByTenant()


def _environment_headers() -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, which an exporter given headers of its own would not read."""
    text = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    pairs = (part.split("=", 1) for part in text.split(",") if "=" in part)
    return {unquote(key.strip()).lower(): unquote(value.strip()) for key, value in pairs}  # the spec's encoding


# ---- what the pipeline calls --------------------------------------------------------------------------


def current_tenant() -> str:
    return _tenant.get()


@contextmanager
def tenant_scope(tenant: str) -> Iterator[None]:
    """Spans started inside belong to the tenant (its project)."""
    token = _tenant.set(tenant)
    try:
        yield
    finally:
        _tenant.reset(token)


@contextmanager
def span(name: str, kind: str = CHAIN, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span, current inside the block; None when tracing is off. An exception is recorded on it."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name) as current:
        current.set_attribute("openinference.span.kind", kind)
        for key, value in (attributes or {}).items():
            if value is not None:
                current.set_attribute(key, value)
        yield current


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Attributes on a span from `span` (nothing when it is None)."""
    if current is not None:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(key, value)


def ids() -> tuple[str, str]:
    """(trace id, span id) of the current span, hex; ("", "") when there is none, or it is not sampled (a
    sampler dropped it: no collector will ever hold it)."""
    if _provider is None:
        return "", ""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not (context.is_valid and context.trace_flags.sampled):
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def traceparent() -> str:
    """The current span as a W3C traceparent, for another process; "" when there is none."""
    if _provider is None:
        return ""
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent", "")


@contextmanager
def attached(parent: str) -> Iterator[None]:
    """Spans started inside nest under the span a traceparent names (from another process)."""
    if not parent or _tracer() is None:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract({"traceparent": parent}))
    try:
        yield
    finally:
        context.detach(token)


def flush(timeout_millis: int | None = None) -> None:
    """Send what is batched, within timeout_millis (default: the exporter's own timeout,
    OTEL_EXPORTER_OTLP_TIMEOUT), then give up: a collector that is down costs a run no more."""
    if _provider is not None:
        _provider.force_flush(exporter_timeout_ms() if timeout_millis is None else timeout_millis)


def exporter_timeout_ms() -> int:
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        try:
            return max(1, int(float(os.environ[variable]) * 1000))  # seconds in the SDK's 1.45 reading
        except (KeyError, ValueError):
            continue
    return FLUSH_TIMEOUT_MS
