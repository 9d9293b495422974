"""Fixtures for a tenant made of our demo documents plus a broken PDF, with its own warehouse and instance.

Synthesizing acme/v1 (embeddings, HDBSCAN, generation, verification), above all in a `rag-eval`
subprocess that loads the embedding model again, is the slow part of most Dagster tests, and a test
that audits or gates only needs its result. `synthesized_acme` gives such a test its own copy of one
synthesis made in process per session: the tables, the published manifest and the embedding cache. The test's instance stays fresh (the `acme_key` fixture registers the partition in it), and a
test never writes the shared copy. A test about synthesis itself still synthesizes.
"""

import shutil
from pathlib import Path

import pytest
from dagster import instance_for_test

from rag_eval_pipeline.definitions import build_definitions, local_resources
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import read_manifest

REPO = Path(__file__).resolve().parents[1]
DEMO_DOCS = REPO / "data" / "tenants" / "demo"
ACME_DOCS = ("routewise-api-spec.md", "incident-response-runbook.md", "customer-sla-contract-summary.pdf")


def lay_out_acme(documents_root: Path) -> Path:
    """The acme tenant folder: three demo documents and a PDF that does not parse."""
    tenant_folder = documents_root / "acme"
    tenant_folder.mkdir(parents=True)
    for name in ACME_DOCS:
        shutil.copy(DEMO_DOCS / name, tenant_folder / name)
    (tenant_folder / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not really a pdf \n%%EOF")
    return tenant_folder


@pytest.fixture
def tenant_dirs(tmp_path):
    documents_root = tmp_path / "documents"
    lay_out_acme(documents_root)
    return documents_root, tmp_path / "warehouse"


@pytest.fixture
def resources(tenant_dirs):
    documents_root, warehouse_root = tenant_dirs
    return local_resources(documents_root, warehouse_root)


@pytest.fixture
def instance():
    with instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def acme_key(instance):
    return register_partition(instance, "acme", "v1")


def synthesize(instance, documents_root: Path, warehouse_root: Path, tenant: str = "acme", version: str = "v1") -> None:
    """Register (tenant, version) and run the synthesis job in process, as `rag-eval run --job synthesis` does.

    The job includes the golden set's blocking check, which publishes it; fails unless it was published.
    """
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("RAG_EVAL_DOCUMENTS_ROOT", str(documents_root))
        environment.setenv("RAG_EVAL_WAREHOUSE", str(warehouse_root))
        for variable in ("RAG_EVAL_JUDGE", "RAG_EVAL_JUDGE_BASE_URL", "RAG_EVAL_JUDGE_MODEL"):
            environment.delenv(variable, raising=False)  # the offline judge and generator, as in every test
        key = register_partition(instance, tenant, version)
        job = build_definitions().resolve_job_def("synthesis")
        result = job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)
    failures = [e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure]
    assert result.success, f"synthesis of {tenant}/{version} failed:\n" + "\n".join(failures)
    assert read_manifest(Warehouse(warehouse_root), tenant, version) is not None, (
        f"{tenant}/{version} was not published"
    )


@pytest.fixture(scope="session")
def synthesized_acme_warehouse(tmp_path_factory) -> Path:
    """A warehouse where acme/v1 went through the synthesis job once. Read-only: tests get copies."""
    root = tmp_path_factory.mktemp("synthesized")
    documents_root, warehouse_root = root / "documents", root / "warehouse"
    lay_out_acme(documents_root)
    with instance_for_test() as session_instance:
        synthesize(session_instance, documents_root, warehouse_root)
    return warehouse_root


@pytest.fixture
def synthesized_acme(synthesized_acme_warehouse, tenant_dirs):
    """This test's tenant_dirs, its warehouse starting as acme/v1 synthesized and published (a private copy)."""
    shutil.copytree(synthesized_acme_warehouse, tenant_dirs[1])
    return tenant_dirs
