"""Per-tenant fairness: the repo's dagster.yaml lets one run per tenant out of the queue at a time.

Real: the instance is built from the repo's dagster.yaml, the runs are created from our code location's
`synthesis` job with the tags Dagster puts on a partitioned run, and Dagster's own
QueuedRunCoordinatorDaemon decides which queued runs to release. Fake: only the run launcher.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import (
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    QueuedRunCoordinator,
    instance_for_test,
)
from dagster._core.launcher import LaunchRunContext, RunLauncher
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.run_coordinator import QueuedRunCoordinatorDaemon
from dagster._serdes import ConfigurableClass, ConfigurableClassData

from rag_eval_pipeline.definitions import defs
from rag_eval_pipeline.partitions import register_partition

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO_DAGSTER_YAML = REPO_ROOT / "dagster.yaml"
TENANT_TAG = "dagster/partition/tenant"
ONE_RUN_PER_TENANT = {"key": TENANT_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
JOB_NAME = "synthesis"
LOCATION_NAME = "rag_eval_pipeline"

# Loading the code location snapshots our schedules, and Dagster itself reads a deprecated property there.
pytestmark = [
    pytest.mark.dagster,
    pytest.mark.filterwarnings("ignore:Property `ScheduleDefinition.environment_vars` is deprecated"),
]


class RecordingRunLauncher(RunLauncher, ConfigurableClass):
    """A fake launcher: the test is about which runs the queue releases, not about executing them."""

    def __init__(self, inst_data: ConfigurableClassData | None = None):
        self._inst_data = inst_data
        self.launched_run_ids: list[str] = []
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: dict) -> RecordingRunLauncher:
        return cls(inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        self.launched_run_ids.append(context.dagster_run.run_id)

    def terminate(self, run_id: str) -> bool:
        return False


def repo_instance_config() -> dict:
    """The repo's dagster.yaml as is, plus the recording launcher so that nothing is executed."""
    config = yaml.safe_load(REPO_DAGSTER_YAML.read_text())
    # By module name, as dagster.yaml names classes; the instance imports this (already loaded) module.
    config["run_launcher"] = {"module": RecordingRunLauncher.__module__, "class": RecordingRunLauncher.__name__}
    return config


def without_tenant_limit(config: dict) -> dict:
    runs = {key: value for key, value in config["concurrency"]["runs"].items() if key != "tag_concurrency_limits"}
    return {**config, "concurrency": {**config["concurrency"], "runs": runs}}


@contextmanager
def our_code_location(instance: DagsterInstance) -> Iterator[WorkspaceProcessContext]:
    """The code location of workspace.yaml, loaded in process (no gRPC server to start and stop)."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="rag_eval_pipeline.definitions", attribute="defs"),
        location_name=LOCATION_NAME,
    )
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as context:
        yield context


@dataclass
class RunQueue:
    """An instance with queued runs of our job, drained by Dagster's own queue daemon."""

    instance: DagsterInstance
    workspace: WorkspaceProcessContext
    daemon: QueuedRunCoordinatorDaemon

    def submit(self, tenant: str, dataset_version: str) -> str:
        """Queue a synthesis run for one partition, as a sensor's RunRequest or the UI would."""
        key = register_partition(self.instance, tenant, dataset_version)
        job = defs.resolve_job_def(JOB_NAME)
        remote_job = self._remote_job()
        run = self.instance.create_run_for_job(
            job,
            # The tags a RunRequest(partition_key=...) resolves to, dagster/partition/tenant among them.
            tags=job.get_tags_for_partition_key(str(key), selected_asset_keys=None),
            # submit_run wants the origins the UI and the daemons give a run: where to load the job from.
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(),
        )
        return self.instance.submit_run(run.run_id, self.workspace.create_request_context()).run_id

    def _remote_job(self):
        location = self.workspace.create_request_context().get_code_location(LOCATION_NAME)
        (repository,) = location.get_repositories().values()
        return repository.get_full_job(JOB_NAME)

    def dequeue_once(self) -> None:
        """One tick of the queue daemon; its generator does the work, so consume it."""
        for _ in self.daemon.run_iteration(self.workspace):
            pass

    def finish(self, run_id: str) -> None:
        """What a run worker reports when its run succeeds: the run stops counting against the limits."""
        event = DagsterEvent(event_type_value=DagsterEventType.RUN_SUCCESS.value, job_name=JOB_NAME)
        self.instance.report_dagster_event(event, run_id=run_id)

    def status(self, run_id: str) -> DagsterRunStatus:
        return self.instance.get_run_by_id(run_id).status

    def launched(self) -> set[str]:
        return set(self.instance.run_launcher.launched_run_ids)


@contextmanager
def run_queue_from(config: dict, dagster_home: Path) -> Iterator[RunQueue]:
    """instance_for_test writes `config` to dagster_home/dagster.yaml and loads the instance from it."""
    with instance_for_test(overrides=config, temp_dir=str(dagster_home)) as instance:
        with our_code_location(instance) as workspace, QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
            yield RunQueue(instance, workspace, daemon)


@pytest.fixture
def repo_run_queue(tmp_path) -> Iterator[RunQueue]:
    with run_queue_from(repo_instance_config(), dagster_home=tmp_path) as queue:
        yield queue


def test_instance_from_repo_config_queues_runs_one_per_tenant(repo_run_queue):
    instance = repo_run_queue.instance
    # QueuedRunCoordinator is also Dagster's default, so the limits are what show the config was read.
    assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
    queue_config = instance.get_concurrency_config().run_queue_config
    assert queue_config.max_concurrent_runs == 4
    assert list(queue_config.tag_concurrency_limits) == [ONE_RUN_PER_TENANT]
    assert isinstance(instance.run_launcher, RecordingRunLauncher)


def test_runs_carry_the_tenant_tag_the_limit_keys_on(repo_run_queue):
    run_id = repo_run_queue.submit("acme", "v1")
    run = repo_run_queue.instance.get_run_by_id(run_id)
    assert run.tags[TENANT_TAG] == "acme"
    assert run.status == DagsterRunStatus.QUEUED


def test_second_run_of_a_tenant_waits_while_another_tenant_proceeds(repo_run_queue):
    queue = repo_run_queue
    # globex is queued last: it overtakes acme's waiting run instead of queuing behind it.
    acme_first, acme_second = queue.submit("acme", "v1"), queue.submit("acme", "v2")
    globex = queue.submit("globex", "v1")

    queue.dequeue_once()
    assert queue.status(acme_second) == DagsterRunStatus.QUEUED, "acme's second run should wait for its first"
    assert queue.status(acme_first) == queue.status(globex) == DagsterRunStatus.STARTING
    assert queue.launched() == {acme_first, globex}

    # Waiting is not a matter of ticks: while acme's first run is in progress, the second stays queued.
    queue.dequeue_once()
    assert queue.status(acme_second) == DagsterRunStatus.QUEUED

    queue.finish(acme_first)
    queue.dequeue_once()
    assert queue.launched() == {acme_first, globex, acme_second}
    assert queue.status(acme_second) == DagsterRunStatus.STARTING


def test_without_the_tenant_limit_the_same_runs_do_not_wait(tmp_path):
    # The contrast: same queue, same max_concurrent_runs, no tag limit -> both acme runs start together.
    with run_queue_from(without_tenant_limit(repo_instance_config()), dagster_home=tmp_path) as queue:
        runs = {queue.submit("acme", "v1"), queue.submit("acme", "v2"), queue.submit("globex", "v1")}
        queue.dequeue_once()
        assert queue.launched() == runs
