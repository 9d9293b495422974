"""A candidate manifest naming an outputs file: the sensor submits the file to the tenant's results store and
the run it requests names the submission, never the answers."""

import json

import pandas as pd

from rag_eval_pipeline.automation.sensors import build_candidate_commit_sensor
from rag_eval_pipeline.evaluation.candidates import CandidateSpec, outputs_text
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import publish
from rag_eval_pipeline_tests.test_automation.conftest import make_definitions, tick

GOLDEN = pd.DataFrame(
    [{"qa_id": "q1", "question": "Q?", "ground_truth": "A.", "gold_chunk_ids": ["c1"], "question_type": "simple"}]
)
ANSWER = "Refunds take five days."


def test_an_outputs_manifest_is_submitted_and_its_run_names_the_submission(tmp_path, roots, instance):
    warehouse = Warehouse(roots[1])
    register_partition(instance, "acme", "v1")
    warehouse.write("acme", "v1", "golden_set", GOLDEN)
    publish(warehouse, "acme", "v1", GOLDEN)
    folder = tmp_path / "candidates"
    folder.mkdir()
    (folder / "answers.jsonl").write_text(json.dumps({"qa_id": "q1", "answer": ANSWER, "contexts": []}) + "\n")
    (folder / "c.json").write_text(json.dumps({"tenant": "acme", "commit": "abc1234", "outputs": "answers.jsonl"}))
    sensor = build_candidate_commit_sensor(folder, roots[1], branch={})

    (request,) = tick(sensor, instance, make_definitions(roots, sensors=[sensor])).run_requests or []

    assert ANSWER not in json.dumps(request.run_config)
    spec = CandidateSpec.parse(request.run_config["ops"]["candidate_outputs"]["config"]["candidate"])
    assert spec.kind == "submitted_outputs"
    assert warehouse.read_submission("acme", "v1", spec.value) == outputs_text(folder / "answers.jsonl")
