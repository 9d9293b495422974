"""A `rag-eval gate` killed with kill -9 leaves its run STARTED, holding its tenant's only run slot: it is
found dead, marked failed, and the tenant's queued run starts.

Real: `rag-eval gate` processes (whose candidate hangs, so the run is mid-flight when killed), the
commands that find and clear their runs (in the test's process, see support/cli.py), the instance they
write (the repo's dagster.yaml, SQLite), Dagster's own queue daemon over the same storage (test_run_queue.py's
harness, whose launcher only records what the queue releases), the dead-run sensor evaluated on that
instance. A live run, here or "elsewhere" while its heartbeat is fresh, is never touched.
"""

import os
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest
from dagster import DagsterEventType, DagsterRunStatus, RunsFilter, build_sensor_context

from rag_eval_pipeline.automation import liveness
from rag_eval_pipeline.automation.run_health import clear_dead, dead_run_sensor, examine
from rag_eval_pipeline_tests.support.cli import RAG_EVAL, rag_eval
from rag_eval_pipeline_tests.test_automation.test_run_queue import repo_instance_config, run_queue_from
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [
    pytest.mark.dagster,
    pytest.mark.cli,
    pytest.mark.filterwarnings("ignore:Property `ScheduleDefinition.environment_vars` is deprecated"),
]

HANGS = "rag_eval_pipeline_tests.candidates:hangs"  # 30 s per golden question: the run is mid-flight for minutes
ELSEWHERE = "another-machine"  # the vantage point of a judge on another machine: no pid of ours means anything there
STALE_AFTER_S = 20  # the heartbeat limit in the tests about it: a beat every 4 s


@contextmanager
def hanging_gate(env, commit: str):
    """A `rag-eval gate` whose run has started and recorded who executes it; killed on exit if still running."""
    process = subprocess.Popen(
        [RAG_EVAL, "gate", "--tenant", "acme", "--candidate", commit, "--entry", HANGS],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process, _wait_for_its_run(env, process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)
        # Not read to its end: Dagster's compute-log mirror (a `tail -F` and its orphan watcher) shares the pipe,
        # and a gate killed between starting the two leaves the tail running, so the pipe never closes.
        process.stderr.close()


def _wait_for_its_run(env, process: subprocess.Popen, timeout_s: float = 300.0) -> str:
    """The id of the process's run once it is STARTED with the process's pid in its liveness record."""
    deadline = time.monotonic() + timeout_s
    with cli_instance(env) as instance:
        while True:
            runs = instance.get_runs(
                RunsFilter(statuses=[DagsterRunStatus.STARTED], tags={liveness.PID_TAG: str(process.pid)})
            )
            if runs:
                return runs[0].run_id
            assert process.poll() is None, f"the gate ended before its run started:\n{process.stderr.read()}"
            assert time.monotonic() < deadline, f"no started run of pid {process.pid} after {timeout_s:.0f} s"
            time.sleep(0.2)


def _kill(process: subprocess.Popen) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _status(env, run_id: str) -> DagsterRunStatus:
    with cli_instance(env) as instance:
        return instance.get_run_by_id(run_id).status


def _failure_message(env, run_id: str) -> str:
    with cli_instance(env) as instance:
        return instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)[-1].message


def _line_of(output: str, run_id: str) -> str:
    (line,) = [line for line in output.splitlines() if run_id in line]
    return line


@contextmanager
def tenant_queue(env, tmp_path):
    """Dagster's queue daemon over the storage `rag-eval` writes, with the repo's run limits."""
    config = {**repo_instance_config(), "storage": {"sqlite": {"base_dir": env["DAGSTER_HOME"]}}}
    (tmp_path / "queue_home").mkdir()
    with run_queue_from(config, dagster_home=tmp_path / "queue_home") as queue:
        yield queue


@pytest.fixture
def gate_env(synthesized_cli_env):
    return synthesized_cli_env


def test_a_killed_gate_is_listed_dead_cleared_and_frees_the_tenant_queue(gate_env, tmp_path):
    with hanging_gate(gate_env, "c-killed") as (gate, run_id):
        # Alive: listed as such, left alone by `clear` and by the sensor.
        listed = _line_of(rag_eval(gate_env, "runs", "stuck", "--tenant", "acme").stdout, run_id)
        assert "STARTED" in listed and f"pid {gate.pid} on" in listed and "alive: its process" in listed
        assert "left run" in _line_of(rag_eval(gate_env, "runs", "clear", "--tenant", "acme").stdout, run_id)
        with cli_instance(gate_env) as instance:
            dead_run_sensor.evaluate_tick(build_sensor_context(instance=instance))
        assert _status(gate_env, run_id) == DagsterRunStatus.STARTED

        _kill(gate)
        with tenant_queue(gate_env, tmp_path) as queue:
            waiting = queue.submit("acme", "v1")  # as a sensor, the schedule or the UI would
            queue.dequeue_once()
            assert queue.status(waiting) == DagsterRunStatus.QUEUED  # the dead run holds acme's only slot

            stuck = rag_eval(gate_env, "runs", "stuck", "--tenant", "acme")
            assert stuck.returncode == 0, stuck.stderr
            assert f"DEAD: its process (pid {gate.pid} on" in _line_of(stuck.stdout, run_id)
            assert "QUEUED" in _line_of(stuck.stdout, waiting)

            cleared = rag_eval(gate_env, "runs", "clear", "--tenant", "acme")
            assert cleared.returncode == 0, cleared.stderr
            assert f"marked run {run_id} failed: its process (pid {gate.pid} on" in cleared.stdout
            assert _status(gate_env, run_id) == DagsterRunStatus.FAILURE
            assert "Marked failed by rag-eval runs clear" in _failure_message(gate_env, run_id)

            queue.dequeue_once()
            assert queue.status(waiting) == DagsterRunStatus.STARTING and waiting in queue.launched()


def test_the_sensor_marks_a_killed_gates_run_failed(gate_env):
    with hanging_gate(gate_env, "c-sensor") as (gate, run_id):
        _kill(gate)
    with cli_instance(gate_env) as instance:
        tick = dead_run_sensor.evaluate_tick(build_sensor_context(instance=instance))
    assert f"marked run {run_id} failed: its process (pid {gate.pid} on" in tick.skip_message
    assert _status(gate_env, run_id) == DagsterRunStatus.FAILURE
    assert "Marked failed by dead_run_sensor" in _failure_message(gate_env, run_id)


def test_the_next_gate_of_the_tenant_clears_a_killed_one_first(gate_env, tmp_path):
    with hanging_gate(gate_env, "c-first") as (gate, run_id):
        _kill(gate)
    with tenant_queue(gate_env, tmp_path) as queue:
        waiting = queue.submit("acme", "v1")
        queue.dequeue_once()
        assert queue.status(waiting) == DagsterRunStatus.QUEUED

        nxt = rag_eval(
            gate_env,
            "gate",
            "--tenant",
            "acme",
            "--candidate",
            "c-next",
            "--entry",
            "rag_eval_pipeline_tests.candidates:i_do_not_know",
        )
        assert nxt.returncode in (0, 1, 2) and "gate: " in nxt.stdout, nxt.stderr  # a verdict, whichever
        assert f"marked run {run_id} of acme failed: its process (pid {gate.pid} on" in nxt.stderr
        assert _status(gate_env, run_id) == DagsterRunStatus.FAILURE

        queue.dequeue_once()  # the next gate's own run has ended too: acme's slot is free
        assert queue.status(waiting) == DagsterRunStatus.STARTING


def test_elsewhere_only_a_stale_heartbeat_makes_a_run_dead(gate_env):
    """A judge on another machine cannot look up our pids: it goes by the heartbeat, and here the pid decides
    at once. A process that is stopped (alive, silent) is alive here, and dead elsewhere once silent too long."""
    env = {**gate_env, "RAG_EVAL_RUN_STALE_AFTER_S": str(STALE_AFTER_S)}
    with hanging_gate(env, "c-remote") as (gate, run_id), cli_instance(env) as instance:
        (seen,) = examine(instance, "acme", here=ELSEWHERE, stale_after_s=STALE_AFTER_S)
        assert not seen.verdict.dead and "beat" in seen.verdict.reason

        os.kill(gate.pid, signal.SIGSTOP)  # alive, but no heartbeat any more
        remote = _until_dead(instance, ELSEWHERE)
        assert remote.heartbeat_age_s > STALE_AFTER_S
        assert remote.reason.startswith(f"no heartbeat from its process (pid {gate.pid} on")
        (local,) = examine(instance, "acme", stale_after_s=STALE_AFTER_S)  # the same records, judged here
        assert not local.verdict.dead and "is running" in local.verdict.reason
        assert clear_dead(instance, by="a test", tenant="acme", stale_after_s=STALE_AFTER_S) == []
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTED

        _kill(gate)  # SIGKILL ends a stopped process too
        (here,) = examine(instance, "acme", stale_after_s=STALE_AFTER_S)
        assert here.verdict.dead and "is gone" in here.verdict.reason  # no waiting for a heartbeat here
        (marked,) = clear_dead(
            instance, by="a test on another machine", tenant="acme", here=ELSEWHERE, stale_after_s=STALE_AFTER_S
        )
        assert marked.run_id == run_id and "no heartbeat" in marked.verdict.reason
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE


def _until_dead(instance, here: str, timeout_s: float = 300.0) -> liveness.Verdict:
    deadline = time.monotonic() + timeout_s
    while True:
        (run,) = examine(instance, "acme", here=here, stale_after_s=STALE_AFTER_S)
        if run.verdict.dead:
            return run.verdict
        assert time.monotonic() < deadline, f"still not dead after {timeout_s:.0f} s: {run.verdict.reason}"
        time.sleep(1)


def test_a_run_that_looks_alive_is_cleared_only_when_named_and_forced(gate_env):
    unnamed = rag_eval(gate_env, "runs", "clear", "--tenant", "acme", "--force")
    assert (
        unnamed.returncode == 2 and "error: --force stops a run that may be alive: name it with --run" in unnamed.stderr
    )
    unknown = rag_eval(gate_env, "runs", "clear", "--tenant", "acme", "--run", "no-such-run")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: no run no-such-run in this Dagster instance")
    with hanging_gate(gate_env, "c-forced") as (gate, run_id):
        other_tenant = rag_eval(gate_env, "runs", "clear", "--tenant", "globex", "--run", run_id, "--force")
        assert other_tenant.returncode == 2 and f"run {run_id} is not a run of globex" in other_tenant.stderr
        forced = rag_eval(gate_env, "runs", "clear", "--tenant", "acme", "--run", run_id, "--force")
        assert forced.returncode == 0, forced.stderr
        # An in-process run cannot be reached by a cancel request: the message says it may still run.
        assert (
            f"run {run_id}: it did not end within 30 s of the cancel request (its process (pid {gate.pid} on"
            in forced.stdout
            and "marked it failed; its process may still be running (status FAILURE)" in forced.stdout
        )
        assert _status(gate_env, run_id) == DagsterRunStatus.FAILURE
        assert "cleared with --force" in _failure_message(gate_env, run_id)
