"""A published version is immutable, all of it, and is published from one snapshot of the documents.

`rag-eval` runs in the test's process (see support/cli.py); `dagster asset materialize`, in processes of
its own, stops a run after some of its steps (rag-eval runs whole jobs only), so two runs interleave step
by step, in the order the test chooses, without timing.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterEventType

from rag_eval_pipeline.stores.layout import SYNTHESIS_TABLES
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.version_tables import snapshot_problems
from rag_eval_pipeline.synthesis.versions import read_manifest
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

DAGSTER = str(Path(sys.executable).parent / "dagster")
REMOVED = "routewise-api-spec.md"  # the acme document most of the golden set's items come from
CHANGED_TEXT = """# RouteWise API Specification

RouteWise is retired. Its endpoints answer 410 Gone since 1 March 2026; use the Shipments API instead.
"""


def _materialize(env, *assets: str) -> subprocess.CompletedProcess:
    """One run of only these assets of acme/v1 (and their checks), as `dagster asset materialize` runs it."""
    return subprocess.run(
        [
            DAGSTER,
            "asset",
            "materialize",
            "-m",
            "rag_eval_pipeline.definitions",
            "--select",
            ",".join(assets),
            "--partition",
            "v1|acme",
        ],  # the key's string form: dimensions in name order
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _hashes(folder: Path, audits: bool = True) -> dict[str, str]:
    """sha256 of every file under the folder (the audits' folders left out unless `audits`)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and (audits or "audits" not in path.relative_to(folder).parts)
    }


def test_a_changed_document_cannot_rewrite_a_published_version(synthesized_cli_env, tenant_dirs):
    env, (documents_root, warehouse_root) = synthesized_cli_env, tenant_dirs
    version_folder = warehouse_root / "acme" / "v1"
    base = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main")
    assert base.returncode == 0, base.stderr  # the reference on acme/v1 becomes the baseline

    # `make demo` again: the same documents run the whole lineage again; the version's tables stay as they are.
    tables = _hashes(version_folder, audits=False)
    again = rag_eval(env, "run", "--tenant", "acme", "--version", "v1")
    assert again.returncode == 0, again.stderr
    assert _hashes(version_folder, audits=False) == tables

    # A document changes: re-synthesizing v1 is refused before its first table, and nothing of v1 changes.
    (documents_root / "acme" / REMOVED).write_text(CHANGED_TEXT, encoding="utf-8")
    before = _hashes(version_folder)
    refused = rag_eval(env, "run", "--tenant", "acme", "--version", "v1")

    assert refused.returncode == 2, refused.stderr
    [error] = [line for line in refused.stderr.splitlines() if line.startswith("error in ")]
    assert error.startswith("error in raw_documents: PublishedVersionImmutable: acme/v1 is published"), error
    assert "this run's raw_documents table is not the published one" in error
    assert "`rag-eval register --tenant acme --version <new>`" in error
    assert _hashes(version_folder) == before

    # So the unchanged reference candidate still measures what it measured.
    after = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "after")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "gate: PASS for commit after on acme/v1" in after.stdout


def _check_evaluation(env) -> dict:
    """The metadata of the golden set's check in the instance's latest run."""
    with cli_instance(env) as instance:
        [run] = instance.get_runs(limit=1)
        [entry] = instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    evaluation = entry.dagster_event.event_specific_data
    return {"passed": evaluation.passed, **{name: value.value for name, value in evaluation.metadata.items()}}


def test_two_runs_that_read_different_documents_never_publish_a_mixture(cli_env, tenant_dirs):
    env, (documents_root, warehouse_root) = cli_env, tenant_dirs
    warehouse = Warehouse(warehouse_root)
    assert rag_eval(env, "register", "--tenant", "acme", "--version", "v1").returncode == 0

    # Run A reads the documents and chunks them, then stops; a document is removed; run B reads the documents.
    first = _materialize(env, "raw_documents", "rejected_documents", "document_chunks")
    assert first.returncode == 0, first.stderr
    (documents_root / "acme" / REMOVED).unlink()
    second = _materialize(env, "raw_documents", "rejected_documents")
    assert second.returncode == 0, second.stderr

    # Run A goes on from its chunks (with the removed document) to a golden set: it must not publish it.
    rest = _materialize(
        env,
        "chunk_clusters",
        "synthetic_qa",
        "generation_failures",
        "generation_plan",
        "golden_set",
        "rejected_qa",
        "synthesis_plan",
    )
    assert rest.returncode != 0, rest.stdout[-3000:]
    check = _check_evaluation(env)
    assert check["passed"] is False
    assert check["published"].startswith("no: acme/v1 is not published: its tables are not one snapshot"), check
    assert "was built from another raw_documents than the stored one" in check["published"]
    assert read_manifest(warehouse, "acme", "v1") is None

    # The next whole run publishes one snapshot: the documents as they are now.
    whole = rag_eval(env, "run", "--tenant", "acme", "--version", "v1", "--job", "synthesis")
    assert whole.returncode == 0, whole.stderr
    assert read_manifest(warehouse, "acme", "v1") is not None
    golden, chunks = warehouse.read("acme", "v1", "golden_set"), warehouse.read("acme", "v1", "document_chunks")
    gold_ids = {chunk_id for ids in golden["gold_chunk_ids"] for chunk_id in ids}
    assert gold_ids and gold_ids <= set(chunks["chunk_id"])
    assert not any(chunk_id.startswith(REMOVED) for chunk_id in set(chunks["chunk_id"]) | gold_ids)
    assert REMOVED not in set(warehouse.read("acme", "v1", "raw_documents")["doc_id"])
    assert snapshot_problems({name: warehouse.read("acme", "v1", name) for name in SYNTHESIS_TABLES}) == []
    assert len(golden) == read_manifest(warehouse, "acme", "v1").n_items
