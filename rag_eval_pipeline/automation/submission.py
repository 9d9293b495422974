"""Hand a lineage run to the instance's run queue instead of running it here, and wait for it.

In production mode the Dagster instance (deploy/celery/dagster.yaml) queues runs and its daemon hands
each to a Celery worker on the queue its tags name; the CLI must then submit the run as `dagster job
launch` would (the run names the code location the daemon loads) rather than execute it in its own
process. `runs_elsewhere` tells which kind of instance this is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.launcher import DefaultRunLauncher
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import FINISHED_STATUSES
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget

from rag_eval_pipeline.partitions import tenant_version_partitions

CODE_MODULE = "rag_eval_pipeline.definitions"
CODE_LOCATION = "rag_eval_pipeline"  # as workspace.yaml names it: the daemon finds the run's code by it
POLL_S = 1.0


def runs_elsewhere(instance: DagsterInstance) -> bool:
    """Whether the instance launches runs on other machines (a Celery run launcher), not in a local process."""
    return not isinstance(instance.run_launcher, DefaultRunLauncher)


def submit(
    instance: DagsterInstance,
    job_name: str,
    partition_key: str,
    run_config: Mapping,
    tags: Mapping[str, str],
    module: str = CODE_MODULE,
    location_name: str = CODE_LOCATION,
    working_directory: str | None = None,
) -> str:
    """Create the run of job_name on partition_key with run_config and tags, and queue it; its id.
    module and location_name: the code location the daemon serves the job from; working_directory: where a
    worker imports module from when it is not installed there."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name=module, working_directory=working_directory),
        location_name=location_name,
    )
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget([origin])) as workspace:
        request = workspace.create_request_context()
        location = request.get_code_location(location_name)
        repository = next(iter(location.get_repositories().values()))
        job = location.get_job(
            JobSubsetSelector(
                location_name=location_name, repository_name=repository.name, job_name=job_name, op_selection=None
            )
        )
        plan = location.get_execution_plan(
            job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=instance
        )
        run = instance.create_run(
            job_name=job.name,
            run_id=None,
            run_config=dict(run_config),
            resolved_op_selection=None,
            step_keys_to_execute=None,
            op_selection=None,
            status=None,
            root_run_id=None,
            parent_run_id=None,
            tags={**tenant_version_partitions.get_tags_for_partition_key(partition_key), **tags},
            job_snapshot=job.job_snapshot,
            execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=job.parent_job_snapshot,
            remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(),
            asset_selection=None,
            asset_check_selection=None,
            asset_graph=repository.asset_graph,
        )
        instance.submit_run(run.run_id, request)
    return run.run_id


def wait_for(instance: DagsterInstance, run_id: str, timeout_s: float) -> DagsterRun:
    """The run once it has finished (succeeded, failed or was canceled); TimeoutError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = instance.get_run_by_id(run_id)
        if run is None:
            raise RuntimeError(f"run {run_id} disappeared from the instance")
        if run.status in FINISHED_STATUSES:
            return run
        if time.monotonic() > deadline:
            raise TimeoutError(run_id)
        time.sleep(POLL_S)


def succeeded(run: DagsterRun) -> bool:
    return run.status == DagsterRunStatus.SUCCESS
