"""The whole lineage in production mode (results in Postgres, large tables in the object store, caches in
Redis) gives the verdicts and scores of the embedded mode, and keeps nothing on the machine's disk."""

import shutil

import pandas as pd
import pytest
from dagster import instance_for_test

from rag_eval_pipeline.cli import main
from rag_eval_pipeline.cli.launch import launch
from rag_eval_pipeline.evaluation.candidates import CandidateSpec
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.reporting.assets import ReportConfig
from rag_eval_pipeline.resources.warehouse import WarehouseResource
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.object_store import ObjectStoreSettings, shared_object_store
from rag_eval_pipeline_tests.tenant_fixtures import DEMO_DOCS, lay_out_acme

pytestmark = [pytest.mark.dagster, pytest.mark.postgres]

TENANTS = {"acme": None, "globex": ("data-retention-policy.md", "oncall-handbook.txt", "warehouse-safety-standard.pdf")}
DEGRADED = CandidateSpec.parse("rag_eval_pipeline_tests.candidates:no_retrieval")


def _lay_out(documents_root):
    lay_out_acme(documents_root)
    globex = documents_root / "globex"
    globex.mkdir()
    for name in TENANTS["globex"]:
        shutil.copy(DEMO_DOCS / name, globex / name)


def _gate_both(monkeypatch, environment: dict[str, str]) -> dict:
    """For each tenant: the full pipeline with the reference (the first baseline), then a degraded audit.
    What each audit decided and scored, read back from the store the mode uses."""
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    found = {}
    with instance_for_test() as instance:
        for tenant in TENANTS:
            key = register_partition(instance, tenant, "v1")
            first = launch(
                instance, "full_pipeline", key, f"{tenant}-good", None, ReportConfig(first_audit_is_baseline=True)
            )  # as `rag-eval run` does
            second = launch(instance, "audit", key, f"{tenant}-bad", DEGRADED, ReportConfig(branch="main"))
            assert (first.status, second.status) == (0, 1), (first.errors, second.errors)  # 1: blocked
            found[tenant] = [first.run_id, second.run_id]
    resource = WarehouseResource(
        root=environment["RAG_EVAL_WAREHOUSE"], database_url=environment.get("RAG_EVAL_DATABASE_URL", "")
    )
    store = resource.store()
    results = {}
    for tenant, runs in found.items():
        reports = [store.read_audit_table(tenant, "v1", run, "regression_report") for run in runs]
        scores = [store.read_audit_table(tenant, "v1", run, "metric_scores") for run in runs]
        history = [(p.commit, p.reason) for p in resource.baselines().history(tenant, "v1")]
        results[tenant] = {
            "reports": reports,
            "scores": scores,
            "history": history,
            "golden": store.read(tenant, "v1", "golden_set"),
        }
    return results


def test_two_tenants_in_production_mode_match_the_embedded_mode(tmp_path, monkeypatch, capsys, production_environment):
    documents_root = tmp_path / "documents"
    _lay_out(documents_root)
    common = {"RAG_EVAL_DOCUMENTS_ROOT": str(documents_root), "RAG_EVAL_CANDIDATE_MODULES": "rag_eval_pipeline_tests"}
    embedded = _gate_both(monkeypatch, {**common, "RAG_EVAL_WAREHOUSE": str(tmp_path / "embedded")})
    production_root = tmp_path / "production"
    production = _gate_both(
        monkeypatch, {**common, **production_environment, "RAG_EVAL_WAREHOUSE": str(production_root)}
    )

    for tenant in TENANTS:
        local, shared = embedded[tenant], production[tenant]
        pd.testing.assert_frame_equal(local["golden"], shared["golden"])
        for ours, theirs in zip(local["scores"], shared["scores"]):
            pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
        verdicts = [
            [str(r["verdict_overall"].iloc[0]) for r in mode[tenant]["reports"]] for mode in (embedded, production)
        ]
        assert verdicts[0] == verdicts[1] and verdicts[0][1] == "block", verdicts
        assert local["history"] == shared["history"] == [(f"{tenant}-good", local["history"][0][1])]

    # Nothing of production mode is on this machine's disk: every table is in Postgres or the object store.
    assert not production_root.exists() or not any(production_root.rglob("*"))
    store = shared_object_store(
        ObjectStoreSettings(
            base_url=production_environment["RAG_EVAL_OBJECT_STORE_URL"],
            endpoint_url=production_environment["RAG_EVAL_OBJECT_STORE_ENDPOINT"],
            access_key_id=production_environment["AWS_ACCESS_KEY_ID"],
            secret_access_key=production_environment["AWS_SECRET_ACCESS_KEY"],
        )
    )
    for tenant in TENANTS:
        pd.testing.assert_frame_equal(
            store.read(tenant, "v1", "document_chunks"),
            Warehouse(tmp_path / "embedded").read(tenant, "v1", "document_chunks"),
        )

    # Whatever its options, acme's gate never sees globex's baseline or audits (row-level security).
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["register", "--tenant", "acme", "--version", "v1"]) == 0
    capsys.readouterr()
    assert main(["gate", "--tenant", "acme", "--version", "v1", "--baseline", "globex-good", "--candidate", "x1"]) == 2
    error = capsys.readouterr().err
    assert "'globex-good' was never audited on acme/v1 (audited commits: acme-bad, acme-good)" in error, error
    assert main(["baseline", "show", "--tenant", "acme"]) == 0
    shown = capsys.readouterr().out
    assert "acme-good" in shown and "globex" not in shown
