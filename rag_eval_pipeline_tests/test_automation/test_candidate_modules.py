"""A candidate manifest may only name code in the packages RAG_EVAL_CANDIDATE_MODULES allows."""

import json

import pandas as pd
import pytest

from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.automation.sensors import build_candidate_commit_sensor
from rag_eval_pipeline.evaluation.candidates import (
    CandidateError,
    CandidateSpec,
    allowed_entry_modules,
    check_entry_allowed,
)
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import publish
from rag_eval_pipeline_tests.test_automation.conftest import make_definitions, tick
from rag_eval_pipeline_tests.test_automation.test_inbox import make_repo

VARIABLE = "RAG_EVAL_CANDIDATE_MODULES"

GOLDEN = pd.DataFrame(
    [{"qa_id": "q1", "question": "Q?", "ground_truth": "A.", "gold_chunk_ids": ["c1"], "question_type": "simple"}]
)


@pytest.fixture
def golden(roots, instance):
    """acme with a published golden set, so a good manifest gets a run request."""
    register_partition(instance, "acme", "v1")
    warehouse = Warehouse(roots[1])
    warehouse.write("acme", "v1", "golden_set", GOLDEN)
    publish(warehouse, "acme", "v1", GOLDEN)
    return roots


def _manifest(folder, name, entry):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"tenant": "acme", "commit": "abcdef1", "entry": entry}))
    return folder / name


# --- the allow-list -------------------------------------------------------------------------------


def test_unset_allows_no_module_entries_only_the_reference(tmp_path, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)

    assert allowed_entry_modules() == ()
    assert inbox.parse_manifest(_manifest(tmp_path, "r.json", "reference"), {"acme"}).candidate == CandidateSpec(
        "reference"
    )
    with pytest.raises(
        inbox.ManifestError, match=rf"m.json: entry 'os:system' is not in an allowed package.*{VARIABLE}"
    ):
        inbox.parse_manifest(_manifest(tmp_path, "m.json", "os:system"), {"acme"})


@pytest.mark.parametrize(
    "entry, allowed",
    [
        ("my_rag:answer", True),
        ("my_rag.pipeline:answer", True),
        ("team.rag.v2:answer", True),
        ("my_ragx:answer", False),  # a prefix is a whole package name, not the start of one
        ("team:answer", False),  # the parent of an allowed package is not allowed
        ("team.other:answer", False),
        ("subprocess:run", False),
    ],
)
def test_entries_are_checked_by_whole_package_prefix(tmp_path, monkeypatch, entry, allowed):
    monkeypatch.setenv(VARIABLE, " my_rag , team.rag ,")
    path = _manifest(tmp_path, "m.json", entry)

    if allowed:
        assert inbox.parse_manifest(path, {"acme"}).candidate == CandidateSpec("entry_point", entry)
    else:
        with pytest.raises(inbox.ManifestError, match="not in an allowed package"):
            inbox.parse_manifest(path, {"acme"})


def test_a_malformed_allow_list_names_the_variable(monkeypatch):
    monkeypatch.setenv(VARIABLE, "my_rag,bad name")

    with pytest.raises(CandidateError, match=rf"{VARIABLE}: invalid module prefix 'bad name'"):
        check_entry_allowed("my_rag:answer", allowed_entry_modules())


# --- the sensor -------------------------------------------------------------------------------------


def test_a_manifest_naming_code_outside_the_allow_list_is_a_skip_reason(tmp_path, golden, instance, monkeypatch):
    monkeypatch.setenv(VARIABLE, "rag_eval_pipeline_tests.candidates")
    sensor = build_candidate_commit_sensor(tmp_path / "candidates", golden[1], branch={})
    defs = make_definitions(golden, sensors=[sensor])
    _manifest(tmp_path / "candidates", "evil.json", "os:system")
    _manifest(tmp_path / "candidates", "good.json", "rag_eval_pipeline_tests.candidates:no_retrieval")

    data = tick(sensor, instance, defs)

    (request,) = data.run_requests
    assert request.run_config["ops"]["candidate_outputs"]["config"]["candidate"] == (
        "rag_eval_pipeline_tests.candidates:no_retrieval"
    )
    assert request.tags["rag_eval/candidate_source"] == "good.json"


def test_a_disallowed_manifest_alone_requests_nothing_and_says_why(tmp_path, golden, instance, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    sensor = build_candidate_commit_sensor(tmp_path / "candidates", golden[1], branch={})
    defs = make_definitions(golden, sensors=[sensor])
    _manifest(tmp_path / "candidates", "evil.json", "os:system")

    data = tick(sensor, instance, defs)

    assert data.run_requests == []
    assert "evil.json: entry 'os:system' is not in an allowed package" in data.skip_message


def test_the_followed_branch_entry_is_operator_configuration_not_restricted(tmp_path, golden, instance, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    make_repo(tmp_path / "repo")
    followed = {"repo": str(tmp_path / "repo"), "branch": "main", "tenant": "acme", "entry": "my_rag:answer"}
    sensor = build_candidate_commit_sensor(tmp_path / "candidates", golden[1], branch=followed)

    data = tick(sensor, instance, make_definitions(golden, sensors=[sensor]))

    (request,) = data.run_requests
    assert request.run_config["ops"]["candidate_outputs"]["config"]["candidate"] == "my_rag:answer"
