"""Production mode keeps a published version whole, as the local warehouse does: the tables in the object store
and in Postgres are never rewritten once published, a version is published from one snapshot of the
documents, and the version's lock (a Postgres advisory lock) excludes other processes."""

import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass

import pytest
from dagster import instance_for_test, materialize

from rag_eval_pipeline import settings
from rag_eval_pipeline.cli.launch import launch
from rag_eval_pipeline.definitions import ALL_ASSETS, production_resources
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.resources.production import ProductionIOManager
from rag_eval_pipeline.stores.layout import SYNTHESIS_TABLES
from rag_eval_pipeline.stores.version_tables import VersionTables, lineage_of, snapshot_problems, table_digest
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS
from rag_eval_pipeline.synthesis.versions import read_manifest
from rag_eval_pipeline_tests.tenant_fixtures import ACME_DOCS, DEMO_DOCS

pytestmark = [pytest.mark.dagster, pytest.mark.postgres]

CHANGED, REMOVED = "routewise-api-spec.md", "customer-sla-contract-summary.pdf"


@dataclass(frozen=True)
class Production:
    tenant: str  # this test's own: the session's database and object store are shared with other tests
    documents: object  # the tenant's document folder
    tables: VersionTables  # where the pipeline keeps the version's tables


@pytest.fixture
def production(tmp_path, monkeypatch, production_environment) -> Production:
    tenant = f"initech-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "documents" / tenant
    folder.mkdir(parents=True)
    for name in ACME_DOCS:
        shutil.copy(DEMO_DOCS / name, folder / name)
    for variable, value in {
        **production_environment,
        "RAG_EVAL_DOCUMENTS_ROOT": str(tmp_path / "documents"),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
    }.items():
        monkeypatch.setenv(variable, value)
    io_manager = ProductionIOManager(
        database_url=production_environment["RAG_EVAL_DATABASE_URL"],
        root=str(tmp_path / "warehouse"),
        object_store_url=production_environment["RAG_EVAL_OBJECT_STORE_URL"],
        object_store_endpoint=production_environment["RAG_EVAL_OBJECT_STORE_ENDPOINT"],
        access_key_id=production_environment["AWS_ACCESS_KEY_ID"],
        secret_access_key=production_environment["AWS_SECRET_ACCESS_KEY"],
    )
    return Production(tenant, folder, io_manager.version_tables())


def _state(production: Production, version: str) -> dict:
    """Each table's content digest and lineage: a rewrite, even of the same content, changes its run."""
    frames = {name: production.tables.read(production.tenant, version, name) for name in SYNTHESIS_TABLES}
    return {name: (table_digest(frame), lineage_of(frame)) for name, frame in frames.items()}


def test_a_published_version_keeps_its_tables_in_postgres_and_the_object_store(production):
    tenant = production.tenant
    with instance_for_test() as instance:
        key = register_partition(instance, tenant, "v1")
        first = launch(instance, "synthesis", key, "c0")
        assert first.status == 0, first.errors
        manifest = read_manifest(production.tables.results, tenant, "v1")
        published = _state(production, "v1")
        assert manifest is not None and {lineage.run_id for _, lineage in published.values()} == {first.run_id}

        same = launch(instance, "synthesis", key, "c0")  # the same documents: a success that writes nothing
        assert same.status == 0, same.errors
        assert _state(production, "v1") == published

        (production.documents / CHANGED).write_text("# RouteWise\n\nRouteWise is retired.\n", encoding="utf-8")
        refused = launch(instance, "synthesis", key, "c0")

    assert refused.status == 2
    [error] = refused.errors
    assert error.startswith(f"error in raw_documents: PublishedVersionImmutable: {tenant}/v1 is published"), error
    assert f"`rag-eval register --tenant {tenant} --version <new>`" in error
    assert _state(production, "v1") == published
    assert read_manifest(production.tables.results, tenant, "v1") == manifest


def _run(instance, key, *assets):
    """A run of only these assets (and their checks) with production mode's resources."""
    return materialize(
        [*ALL_ASSETS, *SYNTHESIS_CHECKS],
        selection=list(assets),
        partition_key=key,
        instance=instance,
        resources=production_resources(settings.load()),
        raise_on_error=False,
    )


def test_two_runs_that_read_different_documents_publish_no_mixture(production):
    tenant, tables = production.tenant, production.tables
    with instance_for_test() as instance:
        key = register_partition(instance, tenant, "v1")
        assert _run(instance, key, "raw_documents", "rejected_documents", "document_chunks").success
        (production.documents / REMOVED).unlink()
        assert _run(instance, key, "raw_documents", "rejected_documents").success
        rest = _run(
            instance,
            key,
            "chunk_clusters",
            "synthetic_qa",
            "generation_failures",
            "generation_plan",
            "golden_set",
            "rejected_qa",
            "synthesis_plan",
        )

        assert not rest.success
        [evaluation] = rest.get_asset_check_evaluations()
        published = evaluation.metadata["published"].value
        assert not evaluation.passed and "is not published: its tables are not one snapshot" in published, published
        assert read_manifest(tables.results, tenant, "v1") is None

        whole = launch(instance, "synthesis", key, "c0")  # the next whole run publishes
        assert whole.status == 0, whole.errors
    assert read_manifest(tables.results, tenant, "v1") is not None
    stored = {name: tables.read(tenant, "v1", name) for name in SYNTHESIS_TABLES}
    assert snapshot_problems(stored) == []
    chunk_ids = set(stored["document_chunks"]["chunk_id"])
    gold_ids = {chunk_id for ids in stored["golden_set"]["gold_chunk_ids"] for chunk_id in ids}
    assert gold_ids and gold_ids <= chunk_ids
    assert not any(chunk_id.startswith(REMOVED) for chunk_id in gold_ids | chunk_ids)


# Asks for a version's lock from another process, waiting 1 s: prints "held" or "free".
PROBE = """
import sys
from rag_eval_pipeline.stores.database import results
from rag_eval_pipeline.stores.database.connection import open_results_database
results.VERSION_LOCK_TIMEOUT_S = 1
store = results.DatabaseStore(open_results_database(sys.argv[1]))
try:
    with store.version_lock(sys.argv[2], sys.argv[3]):
        print("free")
except TimeoutError as error:
    print("held" if "stayed locked by another run" in str(error) else error)
"""


def test_the_version_lock_is_held_across_processes_and_reentrant(production, production_environment):
    tenant, tables = production.tenant, production.tables

    def probe(version: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, production_environment["RAG_EVAL_DATABASE_URL"], tenant, version],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    with tables.version_lock(tenant, "v1"):
        with tables.version_lock(tenant, "v1"):  # publish() inside publish_snapshot()
            assert probe("v1") == "held"
        assert probe("v1") == "held" and probe("v2") == "free"
    assert probe("v1") == "free"
