"""Runs whose process is gone: found from the instance's records, marked failed, their run slots freed.

A run killed with its process (kill -9, out of memory, a lost machine) stays STARTED in Dagster's
records: nothing is left to report its end. It keeps holding its tenant's run slot (one per tenant, four
in all), so the tenant's sensor, schedule and UI runs wait for ever. liveness.py decides which runs are
dead; this module reads what it needs from the instance and marks those runs failed, which frees their
slots. Applied by the `dead_run_sensor` (on by default: the daemon of `dagster dev` or production runs
it every minute), by `rag-eval run|gate` for their tenant before they launch, and by `rag-eval runs`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timezone

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)
from dagster._core.storage.dagster_run import FINISHED_STATUSES, RunRecord

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation import liveness

TENANT_TAG = "dagster/partition/tenant"  # Dagster's tag of a run's tenant; the run queue's limit keys on it
WATCHED = [DagsterRunStatus.QUEUED, *(DagsterRunStatus(status) for status in liveness.IN_PROGRESS)]
POLL_S = 1.0


@dataclass(frozen=True)
class Examined:
    """A queued or in-progress run, and whether its process is gone."""

    record: RunRecord
    verdict: liveness.Verdict

    @property
    def run_id(self) -> str:
        return self.record.dagster_run.run_id

    @property
    def status(self) -> DagsterRunStatus:
        return self.record.dagster_run.status

    @property
    def tenant(self) -> str:
        return self.record.dagster_run.tags.get(TENANT_TAG, "")

    @property
    def since(self) -> float:
        return _since(self.record)


def _since(record: RunRecord) -> float:
    """When the run started, or (never started) when it entered its status, in epoch seconds."""
    if record.start_time is not None:
        return record.start_time
    updated = record.update_timestamp
    return (updated if updated.tzinfo else updated.replace(tzinfo=timezone.utc)).timestamp()


def examine(
    instance: DagsterInstance,
    tenant: str | None = None,
    run_ids: Iterable[str] | None = None,
    here: str | None = None,
    now: float | None = None,
    stale_after_s: float | None = None,
) -> list[Examined]:
    """The queued and in-progress runs (of tenant, or with run_ids), oldest first, each with its verdict as
    judged from machine `here` (default: this one) at `now`."""
    here = here or liveness.this_machine()
    stale_after_s = stale_after_s or settings.load().run_stale_after_s
    filters = RunsFilter(
        statuses=WATCHED,
        tags={TENANT_TAG: tenant} if tenant else {},
        run_ids=list(run_ids) if run_ids is not None else None,
    )
    records = list(reversed(instance.get_run_records(filters)))
    beats = instance.run_storage.get_cursor_values({liveness.heartbeat_key(r.dagster_run.run_id) for r in records})
    now = time.time() if now is None else now
    examined = []
    for record in records:
        run = record.dagster_run
        state = liveness.RunState(
            run.run_id,
            run.status.value,
            _since(record),
            run.tags,
            _seconds(beats.get(liveness.heartbeat_key(run.run_id))),
        )
        examined.append(Examined(record, liveness.judge(state, here, now, stale_after_s)))
    return examined


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def mark_failed(instance: DagsterInstance, run_id: str, why: str, by: str) -> bool:
    """Mark the run failed with why; False when it has finished meanwhile (its own end stands)."""
    run = instance.get_run_by_id(run_id)
    if run is None or run.status in FINISHED_STATUSES:
        return False
    instance.report_run_failed(run, f"Marked failed by {by} on {socket.gethostname()}: {why}")
    return True


def clear_dead(
    instance: DagsterInstance,
    by: str,
    tenant: str | None = None,
    here: str | None = None,
    now: float | None = None,
    stale_after_s: float | None = None,
) -> list[Examined]:
    """Mark every dead run (of tenant) failed; the ones it marked."""
    found = examine(instance, tenant, here=here, now=now, stale_after_s=stale_after_s)
    dead = [run for run in found if run.verdict.dead]
    return [run for run in dead if mark_failed(instance, run.run_id, run.verdict.reason, by)]


@sensor(
    name="dead_run_sensor",
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
    description="Marks failed every run whose process is gone (killed, out of memory, a lost machine), so "
    "that it stops holding its tenant's run slot; see rag_eval_pipeline/automation/liveness.py.",
)
def dead_run_sensor(context: SensorEvaluationContext) -> SkipReason:
    cleared = clear_dead(context.instance, by="dead_run_sensor")
    for run in cleared:
        context.log.warning(f"marked run {run.run_id} ({run.tenant or 'no tenant'}) failed: {run.verdict.reason}")
    return SkipReason(
        "; ".join(f"marked run {run.run_id} failed: {run.verdict.reason}" for run in cleared) or "no dead runs"
    )


# --- stopping one run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ending:
    """What became of a run someone asked to stop."""

    status: DagsterRunStatus
    message: str  # what happened, in words that match the status


def _run(instance: DagsterInstance, run_id: str) -> DagsterRun:
    run = instance.get_run_by_id(run_id)
    if run is None:  # runs are never deleted here; a wrong id is the caller's
        raise ValueError(f"no run {run_id} in this Dagster instance")
    return run


def stop_run(
    instance: DagsterInstance,
    run_id: str,
    grace_s: float,
    by: str,
    force: bool = False,
    here: str | None = None,
    stale_after_s: float | None = None,
) -> Ending:
    """Ask the run coordinator to cancel the run, then wait up to grace_s for it to end. A run whose process
    is gone meanwhile is marked failed; with force, so is a run still in progress when grace_s is over."""
    run = _run(instance, run_id)
    if run.status in FINISHED_STATUSES:
        return Ending(run.status, f"it had already ended ({run.status.value.lower()})")
    was_queued = run.status == DagsterRunStatus.QUEUED
    try:
        instance.run_coordinator.cancel_run(run_id)  # from the queue; or its launcher is asked to stop it
    except Exception as error:  # e.g. a launcher that cannot reach its workers: the run's records still decide
        instance.report_engine_event(f"Cancel request by {by} failed: {type(error).__name__}: {error}", run)
    run = _run(instance, run_id)
    if run.status in (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED):  # not every launcher says so itself
        instance.report_run_canceling(run, message=f"Cancel requested by {by}.")
    deadline = time.monotonic() + grace_s
    while True:
        run = _run(instance, run_id)
        if run.status in FINISHED_STATUSES:
            return Ending(run.status, _ended(run.status, was_queued))
        (current,) = examine(instance, run_ids=[run_id], here=here, stale_after_s=stale_after_s) or [None]
        if current is not None and current.verdict.dead and mark_failed(instance, run_id, current.verdict.reason, by):
            return Ending(
                DagsterRunStatus.FAILURE, f"it was asked to cancel but {current.verdict.reason}: marked it failed"
            )
        if time.monotonic() > deadline:
            why = current.verdict.reason if current is not None else "no record of it"
            if force and mark_failed(instance, run_id, f"cleared with --force; {why}", by):
                return Ending(
                    DagsterRunStatus.FAILURE,
                    f"it did not end within {grace_s:g} s of the cancel request "
                    f"({why}): marked it failed; its process may still be running",
                )
            return Ending(
                run.status, f"it is still {run.status.value.lower()} {grace_s:g} s after the cancel request ({why})"
            )
        time.sleep(POLL_S)


def _ended(status: DagsterRunStatus, was_queued: bool) -> str:
    if status == DagsterRunStatus.CANCELED:
        return "it was still queued, and is canceled" if was_queued else "it was canceled"
    return f"it ended by itself, {'successfully' if status == DagsterRunStatus.SUCCESS else 'as failed'}"
