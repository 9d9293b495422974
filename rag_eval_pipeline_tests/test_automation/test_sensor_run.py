"""A RunRequest from the new-documents sensor, executed for real by the synthesis job."""

from datetime import datetime, timezone

import pytest

from rag_eval_pipeline.automation.sensors import build_new_documents_sensor
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline_tests.test_automation.conftest import copy_demo, make_definitions, tick

pytestmark = [pytest.mark.dagster]


def test_sensor_request_runs_the_synthesis_job(roots, instance):
    copy_demo(roots[0] / "tiny", "routewise-api-spec.md", "incident-response-runbook.md")
    sensor = build_new_documents_sensor(*roots, clock=lambda: datetime(2025, 1, 1, tzinfo=timezone.utc))
    defs = make_definitions(roots, sensors=[sensor])
    (request,) = tick(sensor, instance, defs, tick(sensor, instance, defs).cursor).run_requests

    result = defs.resolve_job_def("synthesis").execute_in_process(
        instance=instance, partition_key=request.partition_key, run_config=request.run_config, tags=request.tags
    )
    assert result.success
    tenant, version = split_key(request.partition_key)
    golden = Warehouse(roots[1]).read(tenant, version, "golden_set")
    assert len(golden) > 0
    assert sorted(Warehouse(roots[1]).read(tenant, version, "raw_documents")["path"]) == [
        "incident-response-runbook.md",
        "routewise-api-spec.md",
    ]
