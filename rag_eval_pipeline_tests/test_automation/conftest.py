"""Temporary documents root, warehouse and Dagster instance, and a tick helper that acts like the daemon."""

import shutil
from pathlib import Path

import pytest
from dagster import Definitions, build_sensor_context, in_process_executor

from rag_eval_pipeline.automation.jobs import audit_job, synthesis_job
from rag_eval_pipeline.definitions import ALL_ASSETS, local_resources

DEMO = Path(__file__).resolve().parents[2] / "data" / "tenants" / "demo"


@pytest.fixture
def roots(tmp_path):
    documents, warehouse = tmp_path / "documents", tmp_path / "warehouse"
    documents.mkdir()
    return documents, warehouse


def make_definitions(roots, sensors=(), schedules=()):
    return Definitions(
        assets=ALL_ASSETS,
        jobs=[synthesis_job, audit_job],
        sensors=list(sensors),
        schedules=list(schedules),
        resources=local_resources(*roots),
        executor=in_process_executor,
    )


def tick(sensor, instance, definitions, cursor=None):
    """Evaluate one tick, then apply its partition requests to the instance as the daemon does."""
    # instance_ref, as the daemon has: without it run requests cannot see dynamic partitions.
    context = build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), cursor=cursor, definitions=definitions
    )
    data = sensor.evaluate_tick(context)
    for request in data.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return data


def copy_demo(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(DEMO / name, folder / name)
