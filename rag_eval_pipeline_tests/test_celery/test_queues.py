"""Tenant -> tier -> Celery queue, and the run tags that carry them."""

import pytest

from rag_eval_pipeline.automation import queues
from rag_eval_pipeline.core.names import PartitionNameError
from rag_eval_pipeline.settings import SettingsError

LARGE = {queues.LARGE_TENANTS_VARIABLE: " acme, globex ,"}


def test_every_tenant_is_small_unless_named_large():
    assert queues.large_tenants({}) == frozenset()
    assert queues.large_tenants(LARGE) == {"acme", "globex"}
    assert queues.tier_of("acme", {}) == "small"
    assert queues.tier_of("acme", LARGE) == "large"
    assert queues.tier_of("demo", LARGE) == "small"


def test_the_variable_is_read_from_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv(queues.LARGE_TENANTS_VARIABLE, "demo")
    assert queues.queue_for("demo") == queues.QUEUES["large"]
    monkeypatch.delenv(queues.LARGE_TENANTS_VARIABLE)
    assert queues.queue_for("demo") == queues.QUEUES["small"]


def test_run_tags_send_each_tier_to_its_own_queue():
    large, small = queues.run_tags("globex", LARGE), queues.run_tags("demo", LARGE)
    assert large == {"dagster-celery/queue": "rag-eval-large", "rag_eval/tier": "large", "dagster/priority": "0"}
    assert small == {"dagster-celery/queue": "rag-eval-small", "rag_eval/tier": "small", "dagster/priority": "1"}


def test_a_bad_name_in_the_variable_names_the_variable():
    with pytest.raises(SettingsError, match=f"^{queues.LARGE_TENANTS_VARIABLE}: invalid tenant name 'Acme Corp'"):
        queues.large_tenants({queues.LARGE_TENANTS_VARIABLE: "globex,Acme Corp"})


def test_a_bad_tenant_is_refused():
    with pytest.raises(PartitionNameError, match="invalid tenant name"):
        queues.run_tags("../etc", LARGE)


def test_the_runs_the_sensors_request_go_to_their_tenants_queue(monkeypatch):
    from rag_eval_pipeline.automation.inbox import CandidateCommit
    from rag_eval_pipeline.automation.sensors import audit_run_request
    from rag_eval_pipeline.evaluation.candidates import REFERENCE_SPEC

    monkeypatch.setenv(queues.LARGE_TENANTS_VARIABLE, "acme")
    tags = {
        tenant: audit_run_request(CandidateCommit(tenant, "c1", REFERENCE_SPEC, "manifest.json"), "v1").tags
        for tenant in ("acme", "demo")
    }
    assert tags["acme"][queues.QUEUE_TAG] == queues.QUEUES["large"]
    assert tags["demo"][queues.QUEUE_TAG] == queues.QUEUES["small"]
    assert int(tags["demo"][queues.PRIORITY_TAG]) > int(tags["acme"][queues.PRIORITY_TAG])
