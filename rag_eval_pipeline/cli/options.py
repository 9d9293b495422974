"""Options several commands share, and the settings they default from (read once per command).

Defaults that come from the environment are callables: click calls them while parsing a command,
never to show its help, so `--help` reads no environment and imports nothing heavy.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.core.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RATE_LIMIT_BUDGET_S,
    DEFAULT_TIMEOUT_S,
    JUDGE_MODES,
    RESPONSE_FORMATS,
)
from rag_eval_pipeline.core.judging.build import JudgeOptions

if TYPE_CHECKING:
    from rag_eval_pipeline.settings import Settings
    from rag_eval_pipeline.stores import Stores
    from rag_eval_pipeline.stores.protocols import ResultsStore


def settings() -> Settings:
    """This command's settings: read from the environment on first use, then kept on its context."""
    root = click.get_current_context().find_root()
    if "settings" not in root.meta:
        from rag_eval_pipeline import settings as settings_module

        root.meta["settings"] = settings_module.load()
    return root.meta["settings"]


def stores() -> Stores:
    """This command's stores (stores.open_stores): the local warehouse, or the results database in production mode."""
    from rag_eval_pipeline.stores import open_stores

    current = settings()
    return open_stores(current.warehouse_root, current.production.database_url)


def results_store() -> ResultsStore:
    """Where this command finds the results."""
    return stores().results


def _from_settings(read):
    """A default taken from this command's settings when the option is not given."""
    return lambda: read(settings())


def metrics_option(command):
    """--metrics, as `checked_metrics` reads it; the default comes from RAG_EVAL_METRICS."""
    return click.option(
        "--metrics",
        default=_from_settings(lambda current: ",".join(current.metrics) or None),
        show_default="RAG_EVAL_METRICS, else every built-in metric",
        help="comma-separated: built-in metrics (`rag-eval metrics` lists them), package.module:function of your "
        "own (in a package RAG_EVAL_CANDIDATE_MODULES allows) or an installed entry point's name",
    )(command)


def checked_metrics(text: str | None) -> tuple[str, ...]:
    """The metric set a --metrics value names (None: every built-in), each one loaded now, so that a team's
    metric that cannot be imported or is not allowed is refused in one line before any work."""
    from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
    from rag_eval_pipeline.evaluation.user_metrics import MetricError, parse_metric_list, resolve_metrics

    chosen = list(BUILTIN_METRICS) if text is None else parse_metric_list(text)
    if not chosen:
        raise BadInput(f"--metrics names no metric; built-in: {', '.join(BUILTIN_METRICS)}")
    try:
        return tuple(metric.name for metric in resolve_metrics(chosen))
    except MetricError as error:
        raise BadInput(f"--metrics: {error}") from None


def partition_options(command):
    command = click.option("--version", required=True, help="dataset version, e.g. v1")(command)
    return click.option("--tenant", required=True)(command)


_JUDGE_OPTIONS = [  # (option, field, click keywords); each defaults from the settings
    ("--judge", "kind", dict(type=click.Choice(["offline", "llm"]), help="default: RAG_EVAL_JUDGE, else offline")),
    (
        "--base-url",
        "base_url",
        dict(
            help="the OpenAI-compatible server; replicas of one model comma-separated, taking the calls in turn "
            "(default: RAG_EVAL_JUDGE_BASE_URL)"
        ),
    ),
    ("--model", "model", dict(help="default: RAG_EVAL_JUDGE_MODEL")),
    ("--api-key", "api_key", dict(help="default: RAG_EVAL_JUDGE_API_KEY, else none needed")),
    (
        "--mode",
        "mode",
        dict(
            type=click.Choice(JUDGE_MODES),
            help="2 LLM calls per item for the core metrics, or 1 (default: RAG_EVAL_JUDGE_MODE, else decomposed)",
        ),
    ),
    (
        "--response-format",
        "response_format",
        dict(
            type=click.Choice(RESPONSE_FORMATS),
            help="json_schema for vLLM and OpenAI, json_object_schema for the llama.cpp server "
            "(default: RAG_EVAL_JUDGE_RESPONSE_FORMAT, else json_schema)",
        ),
    ),
    (
        "--concurrency",
        "concurrency",
        dict(type=int, help=f"LLM calls in flight (default: RAG_EVAL_JUDGE_CONCURRENCY, else {DEFAULT_CONCURRENCY})"),
    ),
    (
        "--timeout-s",
        "timeout_s",
        dict(
            type=float,
            help="seconds one attempt of a call may take "
            f"(default: RAG_EVAL_JUDGE_TIMEOUT_S, else {DEFAULT_TIMEOUT_S:g})",
        ),
    ),
    (
        "--max-retries",
        "max_retries",
        dict(
            type=int,
            help="retries of a call on HTTP 408/409/5xx (not 503), a connection error, a timeout or an HTTP 200 "
            "that is no chat completion, with jittered "
            f"backoff that honours Retry-After (default: RAG_EVAL_JUDGE_MAX_RETRIES, else {DEFAULT_MAX_RETRIES})",
        ),
    ),
    (
        "--rate-limit-budget-s",
        "rate_limit_budget_s",
        dict(
            type=float,
            help="seconds a call may spend retrying HTTP 429 and 503, waiting what Retry-After asks "
            f"(default: RAG_EVAL_JUDGE_RATE_LIMIT_BUDGET_S, else {DEFAULT_RATE_LIMIT_BUDGET_S:g})",
        ),
    ),
    (
        "--priority",
        "priority",
        dict(
            type=int,
            help="vLLM's request priority, lower first; needs a server started with --scheduling-policy priority "
            "(default: RAG_EVAL_JUDGE_PRIORITY, else not sent)",
        ),
    ),
    (
        "--cache",
        "cache",
        dict(
            help="cache of LLM calls: a SQLite file or a redis:// URL, '' for none "
            "(default: RAG_EVAL_JUDGE_CACHE, else judge_cache.sqlite in the warehouse)"
        ),
    ),
]


def judge_options(judge_help: str = ""):
    """Add the judge and LLM server options; the command receives them as one `judge: JudgeOptions`."""

    def decorate(command):
        @functools.wraps(command)
        def with_judge(**kwargs):
            fields = {field: kwargs.pop(field) for _, field, _ in _JUDGE_OPTIONS}
            return command(judge=JudgeOptions(**fields), **kwargs)

        for option, field, keywords in reversed(_JUDGE_OPTIONS):
            if option == "--judge" and judge_help:
                keywords = {**keywords, "help": f"{judge_help} ({keywords['help']})"}
            default = _from_settings(lambda current, field=field: getattr(current.judge, field))
            with_judge = click.option(option, field, default=default, **keywords)(with_judge)
        return with_judge

    return decorate


@contextmanager
def progress_logging() -> Iterator[None]:
    """Our own progress messages (INFO and up) on stderr while a long command runs; other libraries'
    INFO chatter (HTTP requests, model loading) stays hidden."""
    package = logging.getLogger("rag_eval_pipeline")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"))
    level = package.level
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
