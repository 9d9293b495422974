"""One typed run config for every job: it configures only the job's own ops, and Dagster accepts it."""

import pytest
from dagster import Definitions, in_process_executor, validate_run_config

from rag_eval_pipeline.automation.jobs import audit_job, full_pipeline_job, synthesis_job
from rag_eval_pipeline.automation.run_config import lineage_run_config
from rag_eval_pipeline.definitions import ALL_ASSETS, local_resources
from rag_eval_pipeline.evaluation.candidates import CandidateSpec
from rag_eval_pipeline.ingest.assets import ChunkingConfig
from rag_eval_pipeline.reporting.assets import ReportConfig
from rag_eval_pipeline.synthesis.assets import SynthesisConfig, VerificationConfig

EVERYTHING = dict(
    candidate=CandidateSpec.parse("rag_eval_pipeline_tests.candidates:no_retrieval"),
    commit="abc1234",
    report=ReportConfig(tolerance=0.1, branch="main", promote_to_baseline=True),
    chunking=ChunkingConfig(max_tokens=120),
    synthesis=SynthesisConfig(n_items=3),
    verification=VerificationConfig(round_trip_k=3),
)


@pytest.fixture(scope="module")
def definitions(tmp_path_factory):
    roots = tmp_path_factory.mktemp("documents"), tmp_path_factory.mktemp("warehouse")
    return Definitions(
        assets=ALL_ASSETS,
        jobs=[full_pipeline_job, synthesis_job, audit_job],
        resources=local_resources(*roots),
        executor=in_process_executor,
    )


@pytest.mark.parametrize(
    "job, ops",
    [
        (
            "full_pipeline",
            {
                "document_chunks",
                "synthetic_qa",
                "golden_set",
                "candidate_outputs",
                "metric_scores",
                "regression_report",
            },
        ),
        ("synthesis", {"document_chunks", "synthetic_qa", "golden_set"}),
        ("audit", {"candidate_outputs", "metric_scores", "regression_report"}),
    ],
)
def test_each_job_gets_only_its_own_ops_and_dagster_accepts_the_config(definitions, job, ops):
    config = lineage_run_config(job, **EVERYTHING).to_config_dict()

    assert set(config["ops"]) == ops
    validate_run_config(definitions.resolve_job_def(job), config)  # raises on any field Dagster would refuse


def test_the_values_reach_their_ops():
    config = lineage_run_config("full_pipeline", **EVERYTHING).to_config_dict()

    assert (
        config["ops"]["candidate_outputs"]["config"]["candidate"] == "rag_eval_pipeline_tests.candidates:no_retrieval"
    )
    assert config["ops"]["candidate_outputs"]["config"]["commit"] == "abc1234"
    report = config["ops"]["regression_report"]["config"]
    assert (report["tolerance"], report["branch"], report["promote_to_baseline"]) == (0.1, "main", True)
    assert config["ops"]["synthetic_qa"]["config"]["n_items"] == 3
    assert config["loggers"] == {"console": {"config": {"log_level": "WARNING"}}}


def test_defaults_audit_the_reference_and_leave_synthesis_unconfigured():
    audit = lineage_run_config("audit", log_level=None).to_config_dict()

    assert audit["ops"]["candidate_outputs"]["config"]["candidate"] == "reference"
    assert audit["ops"]["candidate_outputs"]["config"]["commit"] == "working-tree"
    assert audit["loggers"] == {}  # Dagster's own console logger, as a daemon-launched run has
    assert lineage_run_config("synthesis").to_config_dict()["ops"] == {}


@pytest.mark.parametrize(
    "job, commit, message",
    [
        ("nightly", "abc1234", "unknown job 'nightly': expected one of full_pipeline, synthesis, audit"),
        ("audit", "two words", "invalid commit 'two words'"),
    ],
)
def test_bad_input_is_one_line(job, commit, message):
    with pytest.raises(ValueError, match=message):
        lineage_run_config(job, commit=commit)
