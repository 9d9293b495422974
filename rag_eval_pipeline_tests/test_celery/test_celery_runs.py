"""Whole runs on real Celery workers fed by Redis, queued by the real daemon on a Postgres instance.

The probe job (celery_job.py) sleeps about a second and records its pid, working directory and times.
Run start and end times come from the instance's run records.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterRunStatus
from dagster._core.launcher import WorkerStatus
from dagster._core.storage.dagster_run import FINISHED_STATUSES

from rag_eval_pipeline.automation import queues, submission
from rag_eval_pipeline.automation.run_health import clear_dead, examine
from rag_eval_pipeline.cli.launch import give_up
from rag_eval_pipeline_tests.support.celery_workers import TIER_ENV, submit_run, wait_for_runs
from rag_eval_pipeline_tests.test_celery.celery_job import HOLD_TAG, UNTIL_TAG
from rag_eval_pipeline_tests.test_celery.conftest import STALE_AFTER_S

pytestmark = [pytest.mark.dagster, pytest.mark.postgres, pytest.mark.celery]

ELSEWHERE = "another-machine"  # a judge's machine where no pid of this one means anything: only heartbeats count


def _submit(cluster_dagster, tenant: str, run_config=queues.IN_PROCESS_RUN_CONFIG, **extra_tags: str) -> str:
    instance = cluster_dagster
    return submit_run(
        instance, tenant, "v1", {**queues.run_tags(tenant, TIER_ENV), **extra_tags}, run_config=run_config
    )


def _interval(record) -> tuple[float, float]:
    return record.start_time, record.end_time


def _failure_message(instance, run_id: str) -> str:
    return instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)[-1].message


def _wait_for_file(path: Path, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written after {timeout_s:.0f} s"
        time.sleep(0.1)
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def small_batch(cluster, cluster_dagster, tmp_path_factory):
    """Three runs of beta, then one of gamma (small tenants), all queued at once. The first beta run keeps
    its slot until the test releases it, so what the queue decided while it ran is read from the records,
    not from who was faster: gamma ran to its end, and the other beta runs were still queued. Both workers
    serve the small queue, so without the per-tenant limit the beta runs would run side by side."""
    instance = cluster_dagster
    release = tmp_path_factory.mktemp("release") / "beta-1"
    run_ids = [_submit(cluster_dagster, "beta", **{UNTIL_TAG: str(release)})]
    run_ids += [_submit(cluster_dagster, tenant) for tenant in ("beta", "beta", "gamma")]
    try:
        _wait_for_file(cluster.records / f"{run_ids[0]}.started", timeout_s=120)
        wait_for_runs(instance, run_ids[3:], timeout_s=120)  # gamma, while beta's first run holds its slot
        while_held = {run_id: instance.get_run_by_id(run_id).status for run_id in run_ids}
    finally:
        release.touch()
    return run_ids, wait_for_runs(instance, run_ids, timeout_s=120), cluster.probe_records(), while_held


def test_both_workers_take_runs(cluster, small_batch):
    run_ids, runs, probes, _ = small_batch
    assert {runs[run_id].dagster_run.status for run_id in run_ids} == {DagsterRunStatus.SUCCESS}
    by_worker = {}
    for run_id in run_ids:
        worker = cluster.worker_of(probes[run_id])
        by_worker.setdefault(worker, set()).add(probes[run_id]["pid"])
        # The run executed in that worker's own environment, not the submitter's.
        assert Path(probes[run_id]["tmpdir"]) == cluster.workers[worker].cwd.parent / "tmp"
        assert runs[run_id].dagster_run.tags[queues.QUEUE_TAG] == queues.QUEUES["small"]
    assert set(by_worker) == {"general", "small_lane"}
    assert not by_worker["general"] & by_worker["small_lane"]


def test_runs_of_one_tenant_never_overlap(small_batch):
    run_ids, runs, probes, while_held = small_batch
    beta = sorted(_interval(runs[run_id]) for run_id in run_ids[:3])
    for (_, previous_end), (next_start, _) in zip(beta, beta[1:]):
        assert next_start >= previous_end
    beta_work = sorted((probes[run_id]["started"], probes[run_id]["finished"]) for run_id in run_ids[:3])
    for (_, previous_end), (next_start, _) in zip(beta_work, beta_work[1:]):
        assert next_start >= previous_end
    # While beta's first run held its slot, the queue held beta's other runs back, and not gamma's.
    assert while_held[run_ids[0]] == DagsterRunStatus.STARTED
    assert [while_held[run_id] for run_id in run_ids[1:3]] == [DagsterRunStatus.QUEUED] * 2
    assert while_held[run_ids[3]] == DagsterRunStatus.SUCCESS


def _dequeue_order(instance, run_ids: list[str]) -> list[str]:
    """The runs in the order the queue daemon dequeued them: the storage ids of the RUN_STARTING events it
    recorded as it handed each to the launcher."""
    dequeued = {
        run_id: instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_STARTING).records[0].storage_id
        for run_id in run_ids
    }
    return sorted(run_ids, key=dequeued.__getitem__)


def test_small_tenant_runs_before_the_large_backlog_drains(cluster, cluster_dagster):
    instance = cluster_dagster
    large = [_submit(cluster_dagster, tenant) for tenant in ("acme", "globex") * 3]
    small = [_submit(cluster_dagster, "delta") for _ in range(2)]
    runs = wait_for_runs(instance, large + small, timeout_s=120)
    assert {run.dagster_run.status for run in runs.values()} == {DagsterRunStatus.SUCCESS}
    probes = cluster.probe_records()
    # Large runs go to the large queue only: the small lane never takes one.
    assert {cluster.worker_of(probes[run_id]) for run_id in large} == {"general"}
    # The queue's own decisions: a small run was dequeued while large ones were still waiting. (Each large
    # tenant runs one at a time, so its three runs take three turns: the backlog outlasts the first round.)
    order = "".join("S" if run_id in small else "L" for run_id in _dequeue_order(instance, large + small))
    assert order.index("S") < order.rindex("L"), f"the small tenant waited for the whole large backlog: {order}"


def test_multiprocess_executor_cannot_run_on_a_worker(cluster_dagster):
    """Why runs on Celery take IN_PROCESS_RUN_CONFIG: a pool process may not start step processes."""
    instance = cluster_dagster
    run_id = _submit(cluster_dagster, "theta", run_config=None)
    assert wait_for_runs(instance, [run_id])[run_id].dagster_run.status == DagsterRunStatus.FAILURE
    failure = instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)[-1].dagster_event
    assert "daemonic processes are not allowed to have children" in str(failure.job_failure_data.error)


def test_run_fails_when_its_process_is_killed(cluster, cluster_dagster):
    """SIGKILL to the process running the run (what the kernel's OOM killer does): Celery records the task
    as failed, and run monitoring fails the run with that reason; it is not run again."""
    instance = cluster_dagster
    run_id = _submit(cluster_dagster, "epsilon", **{HOLD_TAG: "1"})
    started = _wait_for_file(cluster.records / f"{run_id}.started")
    os.kill(started["pid"], signal.SIGKILL)

    run = wait_for_runs(instance, [run_id])[run_id]
    assert run.dagster_run.status == DagsterRunStatus.FAILURE
    message = _failure_message(instance, run_id)
    assert "Detected run worker status FAILED" in message and "Celery task failed" in message
    _assert_nothing_half_written_is_read(cluster, instance, run_id, started)

    # The worker replaced its pool process and takes the tenant's next run.
    next_id = _submit(cluster_dagster, "epsilon")
    assert wait_for_runs(instance, [next_id])[next_id].dagster_run.status == DagsterRunStatus.SUCCESS
    assert cluster.probe_records()[next_id]["pid"] != started["pid"]


def test_run_fails_when_its_whole_worker_is_killed(cluster, cluster_dagster):
    """SIGKILL to a whole worker (a lost machine): its Celery task stays STARTED, which run monitoring
    cannot tell from a long run (it would fail the run only at the 6-hour maximum runtime). The run's
    heartbeat stops with it: a judge on another machine (the daemon's dead_run_sensor, a `rag-eval`) marks
    it failed once the heartbeat is older than the stale limit. It is not re-run on the other worker."""
    instance = cluster_dagster
    run_id = _submit(cluster_dagster, "zeta", **{HOLD_TAG: "1"})
    started = _wait_for_file(cluster.records / f"{run_id}.started")
    worker = cluster.worker_of(started)
    try:
        (alive,) = examine(instance, "zeta", here=ELSEWHERE, stale_after_s=STALE_AFTER_S)
        assert not alive.verdict.dead and f"pid {started['pid']}" in alive.verdict.reason
        cluster.workers[worker].kill()
        cleared = _clear_when_dead(instance, "zeta")
        assert cleared.run_id == run_id and cleared.verdict.heartbeat_age_s > STALE_AFTER_S
        run = wait_for_runs(instance, [run_id])[run_id]
        assert run.dagster_run.status == DagsterRunStatus.FAILURE
        message = _failure_message(instance, run_id)
        assert f"no heartbeat from its process (pid {started['pid']} on" in message
        assert instance.run_launcher.check_run_worker_health(run.dagster_run).status == WorkerStatus.RUNNING
        _assert_nothing_half_written_is_read(cluster, instance, run_id, started)
    finally:
        cluster.restart_worker(worker)


def _clear_when_dead(instance, tenant: str, timeout_s: float = 180.0):
    """What the dead-run sensor does each minute, judged from another machine, until it clears a run."""
    deadline = time.monotonic() + timeout_s
    while True:
        cleared = clear_dead(
            instance, by="a judge on another machine", tenant=tenant, here=ELSEWHERE, stale_after_s=STALE_AFTER_S
        )
        if cleared:
            (run,) = cleared
            return run
        assert time.monotonic() < deadline, f"no run of {tenant} found dead after {timeout_s:.0f} s"
        time.sleep(1)


def test_a_timed_out_wait_says_what_became_of_its_run(cluster, cluster_dagster):
    """`rag-eval` gives up waiting (RAG_EVAL_RUN_TIMEOUT_S) on a run whose worker is lost: asked to cancel, the
    run cannot answer, so it is marked failed, and the message says so; it never says "canceled"."""
    instance = cluster_dagster
    run_id = _submit(cluster_dagster, "iota", **{HOLD_TAG: "1"})
    started = _wait_for_file(cluster.records / f"{run_id}.started")
    worker = cluster.worker_of(started)
    try:
        cluster.workers[worker].kill()
        with pytest.raises(TimeoutError):
            submission.wait_for(instance, run_id, timeout_s=1)
        message = give_up(instance, run_id, STALE_AFTER_S, queues.QUEUES["small"])
        status = instance.get_run_by_id(run_id).status
        assert status == DagsterRunStatus.FAILURE and message.endswith("(status FAILURE)")
        assert message.startswith(f"it was asked to cancel but its process (pid {started['pid']} on")
        assert "marked it failed" in message and "canceled" not in message
        assert "Marked failed by rag-eval (its wait timed out)" in _failure_message(instance, run_id)
    finally:
        cluster.restart_worker(worker)


def test_a_timed_out_wait_on_a_live_run_says_what_its_records_show(cluster, cluster_dagster):
    """On a live run the cancel request reaches its worker; whatever the run's records then show (canceled,
    failed, or still ending), the message says that, and names the same status."""
    instance = cluster_dagster
    run_id = _submit(cluster_dagster, "kappa", **{HOLD_TAG: "1"})
    started = _wait_for_file(cluster.records / f"{run_id}.started")
    with pytest.raises(TimeoutError):
        submission.wait_for(instance, run_id, timeout_s=1)
    message = give_up(instance, run_id, STALE_AFTER_S, queues.QUEUES["small"])
    status = instance.get_run_by_id(run_id).status
    print(f"after the cancel request: {message}")
    try:
        if status in FINISHED_STATUSES:
            assert message.endswith(f"(status {status.value})")
        else:  # still ending: the message says it is still going, never that it ended
            assert "it is still" in message and "marked" not in message
        assert ("canceled" in message) == (status == DagsterRunStatus.CANCELED)
        assert ("failed" in message) == (status == DagsterRunStatus.FAILURE)
    finally:
        if status not in FINISHED_STATUSES:
            os.kill(started["pid"], signal.SIGKILL)
        wait_for_runs(instance, [run_id], timeout_s=180)


def _assert_nothing_half_written_is_read(cluster, instance, run_id: str, started: dict) -> None:
    """The killed run left its partial file, under a name no reader takes; no finished record, one start."""
    assert (cluster.records / f".{run_id}.json.partial").exists()
    assert run_id not in cluster.probe_records()  # every record it reads parses as whole JSON
    assert len(instance.all_logs(run_id, of_type=DagsterEventType.RUN_START)) == 1
    assert json.loads((cluster.records / f"{run_id}.started").read_text(encoding="utf-8"))["pid"] == started["pid"]
