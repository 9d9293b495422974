"""The code location loads, and its lineage is the one the README describes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DefaultSensorStatus

from rag_eval_pipeline.automation.jobs import AUDIT_ASSETS, SYNTHESIS_ASSETS
from rag_eval_pipeline.definitions import ALL_ASSETS, defs
from rag_eval_pipeline.evaluation.definitions import defs as evaluation_defs
from rag_eval_pipeline.ingest.definitions import defs as ingest_defs
from rag_eval_pipeline.metadata import lineage_asset
from rag_eval_pipeline.partitions import tenant_version_partitions
from rag_eval_pipeline.reporting.definitions import defs as reporting_defs
from rag_eval_pipeline.resources.liveness import RUN_LIVENESS_KEY
from rag_eval_pipeline.synthesis.checks import golden_set_expectations
from rag_eval_pipeline.synthesis.definitions import defs as synthesis_defs

REPO = Path(__file__).resolve().parents[2]

# Every table a user can open, with the tables it is made from.
LINEAGE = {
    "raw_documents": set(),
    "rejected_documents": set(),
    "document_chunks": {"raw_documents"},
    "chunk_clusters": {"document_chunks"},
    "synthetic_qa": {"raw_documents", "document_chunks", "chunk_clusters"},
    "generation_failures": {"raw_documents", "document_chunks", "chunk_clusters"},
    "generation_plan": {"raw_documents", "document_chunks", "chunk_clusters"},
    "golden_set": {"synthetic_qa", "document_chunks"},
    "rejected_qa": {"synthetic_qa", "generation_failures", "document_chunks"},
    "synthesis_plan": {"synthetic_qa", "generation_plan", "document_chunks"},
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


# The step (op) that writes each table: one step may write several, but no table is written twice.
STEPS = {
    "raw_documents": {"raw_documents", "rejected_documents"},
    "document_chunks": {"document_chunks"},
    "chunk_clusters": {"chunk_clusters"},
    "synthetic_qa": {"synthetic_qa", "generation_failures", "generation_plan"},
    "golden_set": {"golden_set", "rejected_qa", "synthesis_plan"},
    "candidate_outputs": {"candidate_outputs"},
    "metric_scores": {"metric_scores"},
    "regression_report": {"regression_report"},
}


def test_every_asset_is_partitioned_grouped_and_described():
    graph = defs.resolve_asset_graph()
    for name in LINEAGE:
        node = graph.get(AssetKey(name))
        assert node.partitions_def == tenant_version_partitions
        assert node.group_name in {"ingestion", "synthesis", "evaluation", "reporting"}
        assert node.description and len(node.description) > 40
        assert node.kinds == {"pandas", "parquet"}, name


def test_each_table_is_written_by_exactly_one_step():
    steps = {assets.node_def.name: {key.to_user_string() for key in assets.keys} for assets in ALL_ASSETS}
    assert steps == STEPS
    assert sum(len(tables) for tables in steps.values()) == len(LINEAGE)


def test_every_step_keeps_its_runs_liveness_record_and_the_dead_run_sensor_is_on():
    """What lets a killed run be told from a long one (automation/liveness.py), in every lineage run."""
    for assets in ALL_ASSETS:
        assert RUN_LIVENESS_KEY in assets.node_def.required_resource_keys, assets.node_def.name
    with pytest.raises(TypeError, match="must take `run_liveness: RunLivenessResource`"):
        lineage_asset("ingestion", "a step that forgot its run")(lambda raw_documents: raw_documents)
    sensors = {sensor.name: sensor for sensor in defs.sensors}
    assert sensors["dead_run_sensor"].default_status == DefaultSensorStatus.RUNNING
    assert sensors["dead_run_sensor"].minimum_interval_seconds == 60


def test_the_golden_set_check_declares_everything_it_reads():
    (spec,) = golden_set_expectations.check_specs
    assert {dep.asset_key.to_user_string() for dep in spec.additional_deps} == {"document_chunks", "synthesis_plan"}
    graph = defs.resolve_asset_graph()
    assert graph.get_check_spec(spec.key).partitions_def == tenant_version_partitions


def test_the_code_location_merges_each_domains_definitions():
    domains = {
        "ingestion": ingest_defs,
        "synthesis": synthesis_defs,
        "evaluation": evaluation_defs,
        "reporting": reporting_defs,
    }
    graph = defs.resolve_asset_graph()
    for group, domain in domains.items():
        own = {key.to_user_string() for assets in domain.assets for key in assets.keys}
        assert own == {name for name in LINEAGE if graph.get(AssetKey(name)).group_name == group}, group
    checks = {
        check.name for domain in domains.values() for checks in domain.asset_checks or [] for check in checks.check_keys
    }
    assert checks == {"golden_set_expectations", "regression_gate"}


def test_jobs_cover_the_two_tracks():
    jobs = {job.name: job for job in defs.resolve_all_job_defs()}
    assert set(jobs) >= {"full_pipeline", "synthesis", "audit"}
    built = {name: {key.to_user_string() for key in jobs[name].asset_layer.executable_asset_keys} for name in jobs}
    assert built["synthesis"] == set(SYNTHESIS_ASSETS) == set(LINEAGE) - set(AUDIT_ASSETS)
    assert built["audit"] == {"candidate_outputs", "metric_scores", "regression_report"}
    assert built["full_pipeline"] == set(LINEAGE)


@pytest.mark.dagster
def test_dagster_cli_validates_the_code_location(tmp_path):
    """What `dagster dev` loads: the [tool.dagster] entry of pyproject.toml, from the repo root."""
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "Validation successful" in output
    assert "PreviewWarning" not in output and "preview" not in output.lower(), output


# Fresh interpreter: import the partitions, then check that no warning filter came with them; then
# turn every PreviewWarning into an error and load the whole code location (checks included).
NO_WARNING_SIDE_EFFECTS = """
import warnings
from dagster import PreviewWarning
before = list(warnings.filters)
import rag_eval_pipeline.partitions
assert warnings.filters == before, "importing the partitions changed the warning filters"
warnings.simplefilter("error", PreviewWarning)
from rag_eval_pipeline.definitions import defs
defs.get_repository_def().get_all_jobs()
"""


def test_importing_changes_no_warning_filter_and_no_preview_warning_leaks(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", NO_WARNING_SIDE_EFFECTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr


def test_the_cli_offers_exactly_the_jobs_of_the_code_location():
    # The CLI lists job names itself, so that `rag-eval --help` needs no Dagster: keep the two in step.
    from rag_eval_pipeline.automation.run_config import JOB_ASSETS
    from rag_eval_pipeline.cli.lineage import JOBS

    jobs = {job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__")}
    assert set(JOBS) == jobs == set(JOB_ASSETS)
