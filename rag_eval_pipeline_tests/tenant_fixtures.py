"""Fixtures for a tenant made of our demo documents plus a broken PDF, with its own warehouse and instance."""

import shutil
from pathlib import Path

import pytest
from dagster import instance_for_test

from rag_eval_pipeline.definitions import local_resources
from rag_eval_pipeline.partitions import register_partition

REPO = Path(__file__).resolve().parents[1]
DEMO_DOCS = REPO / "data" / "tenants" / "demo"
SHARED = REPO.parent / "shared"


@pytest.fixture
def tenant_dirs(tmp_path):
    documents_root = tmp_path / "documents"
    tenant_folder = documents_root / "acme"
    tenant_folder.mkdir(parents=True)
    for name in ("routewise-api-spec.md", "incident-response-runbook.md", "customer-sla-contract-summary.pdf"):
        shutil.copy(DEMO_DOCS / name, tenant_folder / name)
    (tenant_folder / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not really a pdf \n%%EOF")
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
