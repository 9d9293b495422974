"""The rule that calls a run dead, on real processes of this machine: a pid that is gone, reaped or not,
a pid given to another process, a process that is alive but silent; and the heartbeat of runs elsewhere."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rag_eval_pipeline.automation import liveness
from rag_eval_pipeline.automation.liveness import Executor, Heartbeat, RunState, judge

HERE = liveness.this_machine()
ELSEWHERE = "another-machine"
NOW = 1_700_000_000.0
STALE_S = 300.0


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def _run(
    executor: Executor | None,
    heartbeat_age_s: float | None = 5.0,
    status: str = "STARTED",
    running_for_s: float = 60.0,
    **tags: str,
) -> RunState:
    heartbeat = None if heartbeat_age_s is None else NOW - heartbeat_age_s
    return RunState("r1", status, NOW - running_for_s, {**(executor.tags() if executor else {}), **tags}, heartbeat)


def _of(process: subprocess.Popen, machine: str = HERE, stale_after_s: float = STALE_S) -> Executor:
    return Executor("h1", machine, process.pid, liveness.process_start(process.pid), stale_after_s)


@pytest.fixture
def sleeper():
    process = _sleeper()
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def test_a_live_process_here_is_alive_however_late_its_heartbeat(sleeper):
    verdict = judge(_run(_of(sleeper), heartbeat_age_s=10 * STALE_S), HERE, NOW, STALE_S)
    assert not verdict.dead and "is running" in verdict.reason


def test_a_killed_process_here_is_dead_at_once_reaped_or_not(sleeper):
    run = _run(_of(sleeper), heartbeat_age_s=0.0)  # its last heartbeat is fresh: the pid decides
    os.kill(sleeper.pid, signal.SIGKILL)
    _wait_for_state(sleeper.pid, "Z")  # killed, not yet reaped by its parent: a zombie runs nothing
    zombie = judge(run, HERE, NOW, STALE_S)
    sleeper.wait(timeout=30)
    reaped = judge(run, HERE, NOW, STALE_S)
    for verdict in (zombie, reaped):
        assert verdict.dead and verdict.reason == f"its process (pid {sleeper.pid} on host h1) is gone"


def test_a_pid_given_to_another_process_is_not_the_run(sleeper):
    reused = Executor("h1", HERE, sleeper.pid, str(int(liveness.process_start(sleeper.pid)) - 1), STALE_S)
    assert judge(_run(reused), HERE, NOW, STALE_S).dead
    assert liveness.process_is_running(sleeper.pid, liveness.process_start(sleeper.pid))
    assert not liveness.process_is_running(sleeper.pid, "1")


def test_this_machine_is_the_same_for_another_process_here():
    other = subprocess.run(
        [sys.executable, "-c", "from rag_eval_pipeline.automation import liveness; print(liveness.this_machine())"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert other.stdout.strip() == HERE


def test_a_run_elsewhere_is_judged_by_its_heartbeat_only(sleeper):
    elsewhere = _of(sleeper, machine=ELSEWHERE)  # its pid means nothing here, running or not
    fresh = judge(_run(elsewhere, heartbeat_age_s=STALE_S - 1), HERE, NOW, STALE_S)
    stale = judge(_run(elsewhere, heartbeat_age_s=STALE_S + 1), HERE, NOW, STALE_S)
    assert not fresh.dead and fresh.reason.endswith("beat 299 s ago")
    assert stale.dead and stale.reason == (
        f"no heartbeat from its process (pid {sleeper.pid} on host h1) for 301 s (the limit is 300 s)"
    )


def test_a_process_that_beats_slowly_is_judged_by_its_own_longer_limit():
    slow = Executor("h2", ELSEWHERE, 42, "7", stale_after_s=900)
    assert not judge(_run(slow, heartbeat_age_s=600), HERE, NOW, STALE_S).dead
    assert judge(_run(slow, heartbeat_age_s=901), HERE, NOW, STALE_S).dead


def test_without_a_heartbeat_the_start_counts_as_the_last_sign_of_life():
    silent = Executor("h2", ELSEWHERE, 42, "7", STALE_S)
    assert not judge(_run(silent, heartbeat_age_s=None, running_for_s=10), HERE, NOW, STALE_S).dead
    assert judge(_run(silent, heartbeat_age_s=None, running_for_s=STALE_S + 10), HERE, NOW, STALE_S).dead


def test_a_run_without_a_liveness_record_is_dead_only_past_its_maximum_runtime():
    young = judge(_run(None, running_for_s=3600), HERE, NOW, STALE_S)
    old = judge(_run(None, running_for_s=liveness.DEFAULT_MAX_RUNTIME_S + 1), HERE, NOW, STALE_S)
    own_limit = judge(_run(None, running_for_s=120, **{liveness.MAX_RUNTIME_TAG: "60"}), HERE, NOW, STALE_S)
    assert not young.dead and "no liveness record" in young.reason
    assert old.dead and own_limit.dead and "longer than its maximum runtime of 60 s" in own_limit.reason


@pytest.mark.parametrize("status", ["STARTING", "STARTED", "CANCELING"])
def test_every_status_that_holds_a_slot_is_judged(status):
    gone = Executor("h1", HERE, 2**22 + 7, "1", STALE_S)  # above any pid this kernel hands out by default
    assert judge(_run(gone, status=status), HERE, NOW, STALE_S).dead


def test_a_queued_run_is_never_dead():
    gone = Executor("h1", HERE, 2**22 + 7, "1", STALE_S)
    assert not judge(_run(gone, status="QUEUED", running_for_s=10**6), HERE, NOW, STALE_S).dead


def test_a_partial_liveness_record_counts_as_none():
    whole = Executor("h1", HERE, 42, "7", STALE_S).tags()
    assert Executor.from_tags(whole) == Executor("h1", HERE, 42, "7", STALE_S)
    assert Executor.from_tags({**whole, liveness.PID_TAG: "forty-two"}) is None
    assert Executor.from_tags({k: v for k, v in whole.items() if k != liveness.MACHINE_TAG}) is None


def test_the_heartbeat_beats_until_stopped_and_outlives_a_failed_beat():
    beats, failed_once = [], threading.Event()

    def beat():
        if not failed_once.is_set():
            failed_once.set()
            raise OSError("database is locked")
        beats.append(time.monotonic())

    heartbeat = Heartbeat(beat, interval_s=0.05).start()
    deadline = time.monotonic() + 60
    while len(beats) < 3:
        assert time.monotonic() < deadline, "the heartbeat stopped after a failed beat"
        time.sleep(0.05)
    heartbeat.stop()
    stopped_at = len(beats)
    time.sleep(0.3)
    assert len(beats) == stopped_at


def _wait_for_state(pid: int, state: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[-1].split()[0] == state:
                return
        assert time.monotonic() < deadline, f"pid {pid} never reached state {state}"
        time.sleep(0.02)
