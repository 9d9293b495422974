"""Is a run's process still there? Who executes a run, its heartbeat, and the rule that calls a run dead.

Every lineage run records, as it starts, the machine and the process that execute it (run tags), then
beats a heartbeat (a timestamp) from a background thread for as long as it executes. A run that
Dagster's records show in progress (STARTING, STARTED, CANCELING) is dead when:

- it runs on this machine and its process is gone, or its pid now belongs to another process: decided
  at once, the kernel knows;
- it runs on another machine and its heartbeat is older than the stale limit (RAG_EVAL_RUN_STALE_AFTER_S,
  or the limit its own process wrote, whichever is longer);
- it has no liveness record (started by an older version, or killed before it wrote one) and it has run
  longer than its maximum runtime (`dagster/max_runtime`, else 6 h: what production's run monitoring allows).

A process on this machine that is alive is never called dead, however late its heartbeat: its run may
still write results, and freeing its slot would start a second run of the tenant beside it.

"This machine" means the same kernel boot and pid namespace, not the same host name: two containers may
share a host name, and a pid is only meaningful inside its namespace.

No Dagster here: run_health.py reads the records from the instance and applies the verdicts.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

HOST_TAG = "rag_eval/host"  # the host name, for people
MACHINE_TAG = "rag_eval/machine"  # boot id and pid namespace: where the pid below means something
PID_TAG = "rag_eval/pid"
PID_STARTED_TAG = "rag_eval/pid_started"  # the process's start time, in clock ticks since boot (Linux)
STALE_AFTER_TAG = "rag_eval/stale_after_s"  # the stale limit of the process that beats the heartbeat
MAX_RUNTIME_TAG = "dagster/max_runtime"  # seconds; Dagster's run monitoring reads it too
HEARTBEAT_KEY_PREFIX = "rag_eval/heartbeat/"  # + run id: the key-value store entry of a run's heartbeat

DEFAULT_MAX_RUNTIME_S = 6 * 3600.0  # as deploy/celery/dagster.yaml's max_runtime_seconds
BEATS_PER_STALE_LIMIT = 5  # a heartbeat may be late four times before its run is called dead

QUEUED = "QUEUED"
IN_PROGRESS = ("STARTING", "STARTED", "CANCELING")  # the statuses that hold a run slot

log = logging.getLogger(__name__)


def heartbeat_key(run_id: str) -> str:
    return f"{HEARTBEAT_KEY_PREFIX}{run_id}"


def heartbeat_interval_s(stale_after_s: float) -> float:
    return stale_after_s / BEATS_PER_STALE_LIMIT


# --- this machine and its processes -------------------------------------------------------------------


def this_machine() -> str:
    """Equal for two processes exactly when each can look up the other's pid: the same kernel boot and the
    same pid namespace. Without /proc (not Linux), the host name is the best there is."""
    boot_id = _read_text("/proc/sys/kernel/random/boot_id")
    if not boot_id:
        return f"host:{socket.gethostname()}"
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. 'pid:[4026531836]'
    except OSError:
        namespace = "pid:?"
    return f"{boot_id}/{namespace}"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, as text (field 22 of /proc/<pid>/stat); None
    when no such process runs (a zombie runs nothing); '' where /proc cannot tell (not Linux)."""
    if pid <= 0:
        return None
    stat = _read_text(f"/proc/{pid}/stat")
    if stat:
        # The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        state, start_ticks = fields[0], fields[19]
        return None if state in ("Z", "X") else start_ticks
    if os.path.isdir("/proc/self"):
        return None  # /proc works here, and has no such process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it exists, and belongs to another user
    return ""


def process_is_running(pid: int, started: str) -> bool:
    """Whether pid is running and is the process that started at `started` (not a later one given the same
    pid); '' for started skips that check."""
    current = process_start(pid)
    return current is not None and (not started or not current or current == started)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read().strip()
    except OSError:
        return ""


# --- who executes a run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Executor:
    """The process that executes a run, as its run tags record it."""

    host: str
    machine: str
    pid: int
    pid_started: str
    stale_after_s: float

    @classmethod
    def current(cls, stale_after_s: float) -> Executor:
        pid = os.getpid()
        return cls(socket.gethostname(), this_machine(), pid, process_start(pid) or "", stale_after_s)

    def tags(self) -> dict[str, str]:
        return {
            HOST_TAG: self.host,
            MACHINE_TAG: self.machine,
            PID_TAG: str(self.pid),
            PID_STARTED_TAG: self.pid_started,
            STALE_AFTER_TAG: f"{self.stale_after_s:g}",
        }

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> Executor | None:
        """None when the run has no (whole) liveness record."""
        try:
            return cls(
                tags[HOST_TAG],
                tags[MACHINE_TAG],
                int(tags[PID_TAG]),
                tags.get(PID_STARTED_TAG, ""),
                float(tags[STALE_AFTER_TAG]),
            )
        except (KeyError, ValueError):
            return None

    def where(self) -> str:
        return f"pid {self.pid} on host {self.host}"


# --- the verdict ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunState:
    """What the instance records of one run that is queued or in progress."""

    run_id: str
    status: str  # a DagsterRunStatus value
    since: float  # when it started (epoch seconds), or was created if it never started
    tags: Mapping[str, str]
    heartbeat_at: float | None  # the last heartbeat (epoch seconds), None if none was recorded


@dataclass(frozen=True)
class Verdict:
    dead: bool
    reason: str  # why it is dead, or what shows it alive (or that nothing can tell)
    executor: Executor | None
    heartbeat_age_s: float | None


ProcessProbe = Callable[[int, str], bool]


def judge(
    run: RunState, here: str, now: float, stale_after_s: float, is_running: ProcessProbe = process_is_running
) -> Verdict:
    """Whether run's process is gone, judged from machine `here` at time `now` (epoch seconds)."""
    executor = Executor.from_tags(run.tags)
    heartbeat_age = None if run.heartbeat_at is None else max(0.0, now - run.heartbeat_at)
    verdict = lambda dead, reason: Verdict(dead, reason, executor, heartbeat_age)
    if run.status == QUEUED:
        return verdict(False, "queued: waiting for a run slot")
    if run.status not in IN_PROGRESS:
        return verdict(False, f"{run.status.lower()}: finished")
    if executor is None:
        return _untracked(run, now, verdict)
    if executor.machine == here:
        if is_running(executor.pid, executor.pid_started):
            return verdict(False, f"its process ({executor.where()}) is running")
        return verdict(True, f"its process ({executor.where()}) is gone")
    limit = max(stale_after_s, executor.stale_after_s)  # a process that beats slowly is not judged by a short limit
    age = heartbeat_age if heartbeat_age is not None else max(0.0, now - run.since)
    if age > limit:
        return verdict(
            True, f"no heartbeat from its process ({executor.where()}) for {age:.0f} s (the limit is {limit:g} s)"
        )
    return verdict(False, f"its process ({executor.where()}) beat {age:.0f} s ago")


def _untracked(run: RunState, now: float, verdict) -> Verdict:
    try:
        max_runtime = float(run.tags.get(MAX_RUNTIME_TAG, DEFAULT_MAX_RUNTIME_S))
    except ValueError:
        max_runtime = DEFAULT_MAX_RUNTIME_S
    running = max(0.0, now - run.since)
    if running > max_runtime:
        return verdict(
            True,
            f"no liveness record, and in progress for {running:.0f} s, longer than its "
            f"maximum runtime of {max_runtime:g} s",
        )
    return verdict(
        False,
        f"no liveness record (started by an older version, or before its first "
        f"heartbeat): cannot tell before its maximum runtime of {max_runtime:g} s",
    )


# --- the heartbeat --------------------------------------------------------------------------------


class Heartbeat:
    """Calls beat() every interval_s on a daemon thread until stop(): it dies with its process, which is
    the point. A failed beat is logged and the next one tried; it never stops the run."""

    def __init__(self, beat: Callable[[], None], interval_s: float, name: str = "rag-eval-heartbeat"):
        self._beat, self._interval_s = beat, interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._interval_s + 30)

    def _loop(self) -> None:
        failing = False
        while not self._stopped.wait(self._interval_s):
            try:
                self._beat()
                failing = False
            except Exception as error:  # a busy or unreachable instance: the next beat may get through
                if not failing:
                    log.warning(
                        "heartbeat not recorded (%s: %s); retrying every %g s",
                        type(error).__name__,
                        error,
                        self._interval_s,
                    )
                failing = True
