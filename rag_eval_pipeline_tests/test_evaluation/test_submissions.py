"""Submitted outputs: checked as an outputs file is, stored in the tenant's own results store under a fresh
id, named by that id in the run's config, and found only by the run of that tenant and version."""

from __future__ import annotations

import json

import pytest

from rag_eval_pipeline.automation.run_config import lineage_run_config
from rag_eval_pipeline.evaluation import candidates
from rag_eval_pipeline.evaluation.candidates import CandidateError, CandidateSpec, outputs_from_text, outputs_text
from rag_eval_pipeline.evaluation.submissions import (
    read_submitted,
    submit_outputs,
    submit_outputs_file,
    submitted,
)
from rag_eval_pipeline.stores.local import Warehouse

RECORDS = [
    {"qa_id": "q1", "answer": "Logs are kept 90 days.", "contexts": [{"id": "c1", "text": "Logs: 90 days."}]},
    {"question": "Who owns it?", "answer": "The platform team.\u2028Really.", "contexts": []},
]
ITEMS = [{"qa_id": "q1", "question": "How long?"}, {"qa_id": "q2", "question": "Who owns it?"}]


@pytest.fixture
def store(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "warehouse")


def test_records_are_stored_under_a_fresh_id_and_read_back_as_the_file_would_be(store, tmp_path):
    path = tmp_path / "outputs.jsonl"
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in RECORDS), encoding="utf-8")

    from_records = submit_outputs(store, "acme", "v1", "abc1234", RECORDS)
    from_text = submit_outputs(store, "acme", "v1", "abc1234", path.read_text(encoding="utf-8"))
    from_file = submit_outputs_file(store, "acme", "v1", "abc1234", path)

    specs = (from_records, from_text, from_file)
    assert {spec.kind for spec in specs} == {"submitted_outputs"}
    assert len({spec.value for spec in specs}) == 3  # two gates of one commit never share a submission
    for spec in specs:
        assert CandidateSpec.parse(str(spec)) == spec and str(spec).startswith("submitted-outputs:")
        assert read_submitted(store, "acme", "v1", spec) == outputs_text(path)
    by_id = {o.qa_id: o for o in outputs_from_text(read_submitted(store, "acme", "v1", from_records), ITEMS)}
    assert by_id["q2"].answer == "The platform team.\u2028Really."  # a line separator inside an answer stays one line


def test_a_submission_is_found_only_in_its_own_tenant_and_version(store):
    spec = submit_outputs(store, "acme", "v1", "abc1234", RECORDS)

    for tenant, version in (("globex", "v1"), ("acme", "v2")):
        with pytest.raises(CandidateError) as error:
            read_submitted(store, tenant, version, spec)
        assert str(error.value).startswith(f"no submitted outputs {spec.value} for {tenant}/{version}:")
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "outputs, message",
    [
        ([], "the submission holds no records"),
        ("\n  \n", "the submission holds no records"),
        ([RECORDS[0], ["not", "an", "object"]], "submission line 2: expected a JSON object, got list"),
        ('{"qa_id": "q1", "answer": "a"}\n{"qa_id": ', "submission line 2: not valid JSON"),
        ([{"qa_id": "q1", "answer": 3}], "the submission has no usable record: line 1: 'answer' must be a string"),
        ([{"qa_id": "q1", "answer": "a", "when": object()}], "submission: a record is not JSON"),
    ],
)
def test_bad_outputs_are_refused_in_one_line_and_nothing_is_stored(store, outputs, message):
    with pytest.raises(CandidateError) as error:
        submit_outputs(store, "acme", "v1", "abc1234", outputs)

    assert message in str(error.value) and "\n" not in str(error.value)
    assert not store.submissions_dir("acme", "v1").exists()


def test_outputs_over_the_size_limit_are_refused(store, monkeypatch):
    monkeypatch.setattr(candidates, "MAX_OUTPUTS_BYTES", 100)
    for outputs in (RECORDS, "\n".join(json.dumps(record) for record in RECORDS * 3)):
        with pytest.raises(CandidateError, match="the submission is larger than 0 MiB"):
            submit_outputs(store, "acme", "v1", "abc1234", outputs)


def test_bad_names_are_refused_before_anything_is_stored(store):
    for tenant, version, commit in (("Acme", "v1", "c1"), ("acme", "../v1", "c1"), ("acme", "v1", "two words")):
        with pytest.raises(ValueError):
            submit_outputs(store, tenant, version, commit, RECORDS)
    assert not store.root.exists() or not any(store.root.rglob("*.jsonl"))


def test_a_submission_id_is_32_hex_digits_whichever_way_the_spec_is_made(store):
    with pytest.raises(CandidateError, match="invalid submission id '../x'"):
        CandidateSpec.parse("submitted-outputs:../x")
    with pytest.raises(CandidateError, match="invalid submission id"):
        CandidateSpec("submitted_outputs", "ABC")
    with pytest.raises(ValueError, match="invalid submission id"):
        store.read_submission("acme", "v1", "*")  # never a glob


def test_the_run_config_names_the_submission_and_never_carries_the_outputs(store, tmp_path):
    path = tmp_path / "outputs.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in RECORDS), encoding="utf-8")
    file = CandidateSpec("outputs_file", str(path))

    with pytest.raises(CandidateError, match="must be submitted to the results store"):
        lineage_run_config("audit", file, commit="abc1234")
    spec = submitted(store, "acme", "v1", "abc1234", file)
    config = lineage_run_config("audit", spec, commit="abc1234").to_config_dict()

    assert config["ops"]["candidate_outputs"]["config"]["candidate"] == f"submitted-outputs:{spec.value}"
    assert "Logs are kept" not in json.dumps(config) and "outputs_jsonl" not in json.dumps(config)
    assert submitted(store, "acme", "v1", "abc1234", candidates.REFERENCE_SPEC) == candidates.REFERENCE_SPEC
    assert "candidate_outputs" not in lineage_run_config("synthesis", file).to_config_dict()["ops"]
