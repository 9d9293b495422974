"""What every lineage asset shares: its partitioning and storage, the metadata the UI shows, and the span
a step's work is traced under (core/tracing.py)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
from dagster import AssetExecutionContext, AssetOut, DagsterInvariantViolationError, MetadataValue, asset, multi_asset

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.names import COMMIT_TAG
from rag_eval_pipeline.partitions import split_key, tenant_version_partitions
from rag_eval_pipeline.resources.liveness import RUN_LIVENESS_KEY

PREVIEW_ROWS = 10
PREVIEW_CELL_CHARS = 80


def table_metadata(frame: pd.DataFrame, preview_columns: list[str], **extra) -> dict:
    preview = frame[preview_columns].head(PREVIEW_ROWS).copy()
    for column in preview.columns:
        preview[column] = preview[column].map(_short)
    return {
        "dagster/row_count": len(frame),
        "preview": MetadataValue.md(preview.to_markdown(index=False) if len(preview) else "_empty_"),
        **extra,
    }


def _short(value) -> str:
    text = str(list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value)
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


KINDS = {"pandas", "parquet"}


def _keeps_its_run_alive(fn: Callable) -> Callable:
    """Every lineage step takes the run_liveness resource (resources/liveness.py), so every lineage run records
    who executes it and beats a heartbeat. A parameter, not required_resource_keys: Dagster refuses both at once."""
    if RUN_LIVENESS_KEY not in inspect.signature(fn).parameters:
        raise TypeError(
            f"lineage step {fn.__name__} must take `{RUN_LIVENESS_KEY}: RunLivenessResource`: without it "
            "a run of only this step records no liveness, and a dead one would hold its tenant's queue"
        )
    return fn


def lineage_asset(group_name: str, description: str):
    """An asset of the evaluation lineage: partitioned by (tenant, dataset_version), stored as Parquet, its
    work traced under a span of its own in its tenant's project (`step_span`)."""
    decorate = asset(
        partitions_def=tenant_version_partitions,
        group_name=group_name,
        kinds=KINDS,
        description=description,
    )
    return lambda fn: decorate(_traced(_keeps_its_run_alive(fn)))


def lineage_table(description: str) -> AssetOut:
    """One table of a step that writes several: stored like every lineage asset."""
    return AssetOut(kinds=KINDS, description=description)


def lineage_multi_asset(name: str, group_name: str, outs: dict[str, AssetOut], **kwargs):
    """A step that writes several lineage tables, each an asset of its own (written once, by this step).

    The step (op) keeps the name of its main table, so run config stays `ops: {<name>: ...}`.
    """
    decorate = multi_asset(
        name=name,
        outs=outs,
        partitions_def=tenant_version_partitions,
        group_name=group_name,
        **kwargs,
    )
    return lambda fn: decorate(_traced(_keeps_its_run_alive(fn)))


@contextmanager
def step_span(context, name: str) -> Iterator[None]:
    """The step's work under a span of its own, in its tenant's project, nested under the run's span when the
    run carries one (the launching process's, in the run's tags: also on a worker)."""
    tenant, version = split_key(context.partition_key)
    run = context.run
    attributes = {
        "rag_eval.tenant": tenant,
        "rag_eval.dataset_version": version,
        "rag_eval.run_id": run.run_id,
        "rag_eval.commit": run.tags.get(COMMIT_TAG),
    }
    with tracing.tenant_scope(tenant), tracing.attached(run.tags.get(tracing.TRACEPARENT_TAG, "")):
        with tracing.span(name, tracing.CHAIN, attributes):
            yield


def _traced(fn: Callable) -> Callable:
    """The step's body inside `step_span` (every step: a judge re-scoring a baseline, an embedding batch of
    a synthesis, all of it in the tenant's project). Dagster reads the parameters through functools.wraps;
    the context comes from Dagster's own, as not every step takes it."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            with _step_span_of_current(fn.__name__):
                yield from fn(*args, **kwargs)

        return generator

    @functools.wraps(fn)
    def function(*args, **kwargs):
        with _step_span_of_current(fn.__name__):
            return fn(*args, **kwargs)

    return function


@contextmanager
def _step_span_of_current(name: str) -> Iterator[None]:
    try:
        context = AssetExecutionContext.get()
    except DagsterInvariantViolationError:  # called outside a run (a test invoking the function itself)
        yield
        return
    with step_span(context, name):
        yield
