"""`rag-eval gate --outputs`: the answers go to the tenant's results store before the run, and the run's
config (Dagster's runs table) names them only by their submission id; the audit is the file's, as before."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.evaluation.candidates import CandidateSpec, outputs_from_text, outputs_text
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.layout import MANIFEST_FILE
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

FINISHED = re.compile(r"^run (\S+) \(audit\) finished", re.MULTILINE)
COMPARED = ["qa_id", "answer", "contexts", "status", "error"]


def _golden_outputs(tables: Path) -> list[dict]:
    """The golden items answered by their ground truth over their gold chunks: a candidate that scores.
    At most 30 words: the offline judge abstains on the faithfulness of longer answers."""
    chunks = pd.read_parquet(tables / "document_chunks.parquet").set_index("chunk_id")["text"]
    golden = pd.read_parquet(tables / "golden_set.parquet")
    return [
        {
            "qa_id": item["qa_id"],
            "answer": " ".join(item["ground_truth"].split()[:30]),
            "contexts": [{"id": chunk, "text": chunks[chunk]} for chunk in item["gold_chunk_ids"]],
        }
        for item in golden.to_dict("records")
    ]


def _write_outputs(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _gate(env: dict, tenant: str, commit: str, outputs: Path, *extra: str) -> tuple[int, str, str]:
    """(exit status, stdout, the run's id)."""
    completed = rag_eval(env, "gate", "--tenant", tenant, "--candidate", commit, "--outputs", str(outputs), *extra)
    found = FINISHED.search(completed.stdout)
    assert found, completed.stderr
    return completed.returncode, completed.stdout, found.group(1)


def _answer_texts(records: list[dict]) -> list[str]:
    return [record["answer"] for record in records] + [c["text"] for r in records for c in r["contexts"]]


def _config_of(env: dict, run_id: str) -> str:
    with cli_instance(env) as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        return json.dumps(run.run_config)


def _expected_outputs(outputs: Path, golden: pd.DataFrame) -> pd.DataFrame:
    """What the audit read from the file's records when they travelled in the run's config."""
    items = golden[["qa_id", "question"]].to_dict("records")
    return pd.DataFrame([asdict(o) for o in outputs_from_text(outputs_text(outputs), items)])[COMPARED]


def _same_outputs(stored: pd.DataFrame, expected: pd.DataFrame) -> None:
    stored = stored[COMPARED].copy()
    stored["contexts"] = stored["contexts"].map(lambda contexts: [dict(c) for c in contexts])
    pd.testing.assert_frame_equal(stored.reset_index(drop=True), expected, check_dtype=False)


def test_an_outputs_gate_keeps_the_answers_out_of_the_run_config_and_decides_as_before(synthesized_cli_env, tmp_path):
    env = synthesized_cli_env
    tables = Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1"
    records = _golden_outputs(tables)
    outputs = _write_outputs(tmp_path / "outputs.jsonl", records)

    first, first_out, first_run = _gate(env, "acme", "first", outputs, "--branch", "main")
    second, second_out, second_run = _gate(env, "acme", "second", outputs)

    assert first == 0 and "NO BASELINE YET" in first_out  # the first audit of the version: the baseline
    assert second == 0 and "gate: PASS" in second_out and "baseline: first" in second_out
    for run_id in (first_run, second_run):
        config = _config_of(env, run_id)
        assert "submitted-outputs:" in config
        assert not [text for text in _answer_texts(records) if text in config]
    (path,) = tables.glob(f"audits/commit=second/run={second_run}/candidate_outputs.parquet")
    _same_outputs(pd.read_parquet(path), _expected_outputs(outputs, pd.read_parquet(tables / "golden_set.parquet")))
    assert len(list(tables.glob("submissions/commit=first/*.jsonl"))) == 1  # in acme's own store, by commit


def test_a_submission_of_another_tenant_is_not_found_by_the_run(synthesized_cli_env, tmp_path):
    """A run configured by hand with another tenant's submission id finds nothing in its own store: one line."""
    from rag_eval_pipeline.cli.launch import launch
    from rag_eval_pipeline.evaluation.submissions import submit_outputs

    env = synthesized_cli_env
    warehouse = Warehouse(env["RAG_EVAL_WAREHOUSE"])
    theirs = submit_outputs(warehouse, "globex", "v1", "c1", _golden_outputs(warehouse.partition_dir("acme", "v1")))

    with pytest.MonkeyPatch.context() as environment:
        for name in ("DAGSTER_HOME", "RAG_EVAL_WAREHOUSE", "RAG_EVAL_DOCUMENTS_ROOT"):
            environment.setenv(name, env[name])
        with cli_instance(env) as instance:
            outcome = launch(instance, "audit", register_partition(instance, "acme", "v1"), "c1", theirs)

    assert outcome.status == 2
    (line,) = [line for line in outcome.errors if "candidate_outputs" in line]
    assert f"no submitted outputs {theirs.value} for acme/v1" in line and "\n" not in line


# --- production mode: the results in Postgres (the large tables stay local: no object store here) ------


def _into_production(env: dict, database, tenant: str) -> None:
    """acme/v1 as tenant/v1 in production mode: its golden set and manifest in Postgres, its large tables local."""
    from rag_eval_pipeline.stores.database.results import DatabaseStore

    warehouse = Path(env["RAG_EVAL_WAREHOUSE"])
    shutil.copytree(warehouse / "acme" / "v1", warehouse / tenant / "v1")
    store = DatabaseStore(database)
    for name in ("golden_set", "rejected_qa"):
        store.write(tenant, "v1", name, pd.read_parquet(warehouse / "acme" / "v1" / f"{name}.parquet"))
    manifest = json.loads((warehouse / "acme" / "v1" / MANIFEST_FILE).read_text(encoding="utf-8"))
    store.write_text(tenant, "v1", MANIFEST_FILE, json.dumps({**manifest, "tenant": tenant}))
    with cli_instance(env) as instance:
        register_partition(instance, tenant, "v1")


@pytest.mark.postgres
def test_in_production_mode_the_outputs_are_a_row_of_the_tenant_and_the_run_config_names_it(
    synthesized_cli_env, tmp_path, upgraded_database, app_database
):
    from rag_eval_pipeline.stores.database.results import DatabaseStore

    tenant = f"outputs-{uuid.uuid4().hex[:8]}"
    env = {**synthesized_cli_env, "RAG_EVAL_DATABASE_URL": upgraded_database.app_url}
    _into_production(env, app_database, tenant)
    records = _golden_outputs(Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1")
    outputs = _write_outputs(tmp_path / "outputs.jsonl", records)

    first, first_out, first_run = _gate(env, tenant, "first", outputs, "--version", "v1", "--branch", "main")
    second, second_out, second_run = _gate(env, tenant, "second", outputs, "--version", "v1")

    assert first == 0 and "NO BASELINE YET" in first_out
    assert second == 0 and "gate: PASS" in second_out
    config = _config_of(env, second_run)
    assert not [text for text in _answer_texts(records) if text in config]
    spec = CandidateSpec.parse(json.loads(config)["ops"]["candidate_outputs"]["config"]["candidate"])
    store = DatabaseStore(app_database)
    assert store.read_submission(tenant, "v1", spec.value) == outputs_text(outputs)
    assert store.read_submission("acme", "v1", spec.value) is None  # row-level security: not another tenant's
    stored = store.read_audit_table(tenant, "v1", second_run, "candidate_outputs")
    assert stored is not None
    _same_outputs(stored, _expected_outputs(outputs, store.read(tenant, "v1", "golden_set")))
    assert not list(Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"{tenant}/v1/submissions/**/*.jsonl"))  # none on disk
