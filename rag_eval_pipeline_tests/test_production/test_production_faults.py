"""Production mode's faults: the results database restarted between two runs or down during one, the object
store down during one. A run fails with a clear message or succeeds; nothing half-written is read as a result."""

import pytest
from dagster import instance_for_test

from rag_eval_pipeline.cli.launch import launch
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.reporting.assets import ReportConfig
from rag_eval_pipeline.resources.warehouse import WarehouseResource
from rag_eval_pipeline.stores.database.upgrade import upgrade
from rag_eval_pipeline.synthesis.versions import read_manifest
from rag_eval_pipeline_tests.support.object_store import start_seaweed_s3
from rag_eval_pipeline_tests.support.postgres import APP_ROLE, PrivateServer
from rag_eval_pipeline_tests.support.services import production_variables
from rag_eval_pipeline_tests.tenant_fixtures import lay_out_acme

FIRST_AUDIT_IS_BASELINE = ReportConfig(first_audit_is_baseline=True)  # as `rag-eval run` does

pytestmark = [pytest.mark.dagster, pytest.mark.postgres]


@pytest.fixture
def private_postgres():
    """A Postgres of this test's own (initdb in a temporary folder, its own port): it is restarted and stopped."""
    server = PrivateServer.create()
    server.start()
    yield server
    server.remove()


def test_runs_across_a_database_restart_and_with_a_service_down(tmp_path, monkeypatch, private_postgres):
    upgrade(private_postgres.url())
    object_store = start_seaweed_s3()
    try:
        app_url = private_postgres.url(user=APP_ROLE)
        lay_out_acme(tmp_path / "documents")
        for variable, value in {
            **production_variables(app_url, object_store, "faults"),
            "RAG_EVAL_DOCUMENTS_ROOT": str(tmp_path / "documents"),
            "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
        }.items():
            monkeypatch.setenv(variable, value)
        resource = WarehouseResource(root=str(tmp_path / "warehouse"), database_url=app_url)
        with instance_for_test() as instance:
            key = register_partition(instance, "acme", "v1")
            assert launch(instance, "synthesis", key, "c0").status == 0

            private_postgres.restart()  # between two runs: the next one reconnects
            assert launch(instance, "audit", key, "c1", None, FIRST_AUDIT_IS_BASELINE).status == 0

            private_postgres.stop()  # during a run: it fails saying which database, and writes nothing
            down = launch(instance, "audit", key, "c2")
            private_postgres.start()
            assert down.status == 2 and any("RAG_EVAL_DATABASE_URL" in line for line in down.errors), down.errors
            assert resource.baselines().audited_commits("acme", "v1") == ["c1"]
            assert resource.store().read_audit_table("acme", "v1", down.run_id, "candidate_outputs") is None

            object_store.stop()  # the object store down: the synthesis fails naming it, nothing is published
            v2 = register_partition(instance, "acme", "v2")
            failed = launch(instance, "synthesis", v2, "c0")
            assert failed.status == 2 and any(object_store.endpoint_url in line for line in failed.errors), (
                failed.errors
            )
            object_store.start()
            assert read_manifest(resource.store(), "acme", "v2") is None
            assert launch(instance, "audit", key, "c3").status == 0  # and the next run works
    finally:
        object_store.close()
