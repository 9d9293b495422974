"""The code location loads, and its lineage is the one the README describes."""

import os
import subprocess
import sys
from pathlib import Path

from dagster import AssetKey

from rag_eval_pipeline.definitions import defs
from rag_eval_pipeline.partitions import tenant_version_partitions

REPO = Path(__file__).resolve().parents[2]

LINEAGE = {
    "raw_documents": set(),
    "document_chunks": {"raw_documents"},
    "chunk_clusters": {"document_chunks"},
    "synthetic_qa": {"raw_documents", "document_chunks", "chunk_clusters"},
    "golden_set": {"synthetic_qa", "document_chunks"},
    "candidate_outputs": {"golden_set", "document_chunks"},
    "metric_scores": {"golden_set", "candidate_outputs"},
    "regression_report": {"metric_scores", "golden_set", "candidate_outputs"},
}


def test_lineage_snapshot():
    graph = defs.resolve_asset_graph()
    actual = {
        key.to_user_string(): {parent.to_user_string() for parent in graph.get(key).parent_keys}
        for key in graph.get_all_asset_keys()
    }
    assert actual == LINEAGE


def test_every_asset_is_partitioned_grouped_and_described():
    graph = defs.resolve_asset_graph()
    for name in LINEAGE:
        node = graph.get(AssetKey(name))
        assert node.partitions_def == tenant_version_partitions
        assert node.group_name in {"ingestion", "synthesis", "evaluation", "reporting"}
        assert node.description and len(node.description) > 40


def test_jobs_cover_the_two_tracks():
    assert {job.name for job in defs.resolve_all_job_defs()} >= {"full_pipeline", "synthesis", "audit"}


def test_dagster_cli_validates_the_code_location(tmp_path):
    """What `dagster dev` loads: the [tool.dagster] entry of pyproject.toml, from the repo root."""
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Validation successful" in completed.stdout + completed.stderr
