"""`rag-eval calibrate` on small labels files: the printed figures, the stored labels and calibration under
the judge's identity, every bad input (one line, exit 2, nothing stored), two imports at once, and a
tenant's calibration in production mode, invisible to another tenant.

The offline judge scores these answers plainly: an answer that repeats the context is faithful (1), one
that changes its number or its negation is not (0), and "I don't know." makes no statement (unmeasured).
"""

import json
import os
import subprocess
import uuid

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.evaluation.calibration import JudgeIdentity, load_calibration
from rag_eval_pipeline.evaluation.labels import read_labels
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline_tests.support.cli import PROCESS_TIMEOUT_S, RAG_EVAL, rag_eval, rag_eval_process

pytestmark = [pytest.mark.cli]

CONTEXT = "Refunds are processed within 14 days of the request. Store credit never expires."
REFUNDS, CREDIT = "How long do refunds take?", "Does store credit expire?"
ROWS = [
    (REFUNDS, "Refunds are processed within 14 days of the request.", 1, "refunds"),
    (REFUNDS, "Refunds are processed within 45 days of the request.", 0, "refunds"),
    (CREDIT, "Store credit never expires.", 1, "credit"),
    (CREDIT, "Store credit expires after a year.", 0, "credit"),
    (CREDIT, "I don't know.", 1, ""),
]
FAITHFULNESS = JudgeIdentity(OfflineJudge.name, 5, ("faithfulness",))


def _records(rows=ROWS, label_column="faithfulness_label") -> list[dict]:
    return [
        {
            "id": f"r{number}",
            "user_input": question,
            "retrieved_contexts": [CONTEXT],
            "response": answer,
            "reference": "",
            label_column: label,
            "pair_id": pair_id,
        }
        for number, (question, answer, label, pair_id) in enumerate(rows)
    ]


def _write(path, records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return str(path)


@pytest.fixture
def env(tmp_path) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAG_EVAL_")}
    return {**environment, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}


def _warehouse(env) -> Warehouse:
    return Warehouse(env["RAG_EVAL_WAREHOUSE"])


def test_calibrate_prints_the_figures_and_stores_labels_and_calibration_under_the_judge_identity(tmp_path, env):
    labels = _write(tmp_path / "labels.jsonl", _records())
    done = rag_eval(env, "calibrate", "--labels", labels, "--tenant", "acme", "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (row,) = [line for line in lines if line.startswith("faithfulness ")]
    assert row.split()[:7] == ["faithfulness", "5", "4", "1.000", "[1.000,", "1.000]", "(0.500)"]
    assert row.count("1.000 [1.000, 1.000]") == 5  # accuracy twice, kappa, ROC-AUC, pairwise
    assert "faithfulness: n_labels 5, measured 4, 1 unmeasured (1 the answer makes no statement to verify)" in lines
    assert f"judge {OfflineJudge.name}, k 5, metrics faithfulness (identity {FAITHFULNESS.key()})" in lines
    assert "5 labels of labels.jsonl added to acme's labels (5 in all)" in lines

    store = _warehouse(env)
    stored = read_labels(store, "acme")
    assert sorted(stored["label"]) == [0, 0, 1, 1, 1] and set(stored["source"]) == {"labels.jsonl"}
    assert set(stored["pair_id"]) == {"refunds", "credit", ""}
    calibration = load_calibration(store, "acme", FAITHFULNESS)
    assert calibration is not None
    assert calibration.row("faithfulness")["n_measured"] == 4 and calibration.row("faithfulness")["n_pairs"] == 2
    assert sorted(calibration.items["score"]) == [0.0, 0.0, 1.0, 1.0]


def test_a_calibration_by_another_identity_is_ignored(tmp_path, env):
    labels = _write(tmp_path / "labels.jsonl", _records())
    assert (
        rag_eval(env, "calibrate", "--labels", labels, "--tenant", "acme", "--metrics", "faithfulness").returncode == 0
    )
    store = _warehouse(env)
    for other in (
        JudgeIdentity(OfflineJudge.name, 3, ("faithfulness",)),  # another k
        JudgeIdentity(OfflineJudge.name, 5, ("answer_relevance", "faithfulness")),  # another metric set
        JudgeIdentity("llm:m:decomposed:prompt-0123abcd", 5, ("faithfulness",)),  # another judge
    ):
        assert load_calibration(store, "acme", other) is None

    # The tenant's stored labels, calibrated under a second identity: both calibrations are kept, apart.
    done = rag_eval(env, "calibrate", "--tenant", "acme", "--metrics", "faithfulness,answer_relevance", "--k", "3")
    assert done.returncode == 0, done.stderr
    second = load_calibration(store, "acme", JudgeIdentity(OfflineJudge.name, 3, ("faithfulness", "answer_relevance")))
    assert second is not None and second.summary["metric"].tolist() == ["faithfulness"]  # the only labelled one
    assert load_calibration(store, "acme", FAITHFULNESS) is not None


def test_without_a_tenant_nothing_is_stored(tmp_path, env):
    labels = _write(tmp_path / "labels.jsonl", _records())
    done = rag_eval(env, "calibrate", "--labels", labels, "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr
    assert "not stored (no --tenant)" in done.stdout and "1.000 [1.000, 1.000]" in done.stdout
    assert not any(p.is_dir() for p in _warehouse(env).root.glob("*"))  # no tenant folder at all


def test_graded_labels_are_said_to_be_cut_at_one_half(tmp_path, env):
    rows = [(q, a, {1: 0.9, 0: 0.2}[label], pair) for q, a, label, pair in ROWS[:4]]
    labels = _write(tmp_path / "graded.jsonl", _records(rows))
    done = rag_eval(env, "calibrate", "--labels", labels, "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr
    assert "faithfulness: graded labels are read as good at >= 0.5 for every figure" in done.stdout


def test_a_tenant_without_labels_is_told_to_give_a_file(env):
    done = rag_eval(env, "calibrate", "--tenant", "globex")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: tenant globex has no labels of ")


BAD_FILES = {
    "no label column": ([{**r, "faithfulness_label": None} for r in _records()], "has no label column"),
    "label outside [0, 1]": (
        [*_records()[:2], {**_records()[2], "faithfulness_label": 1.5}],
        "line 3, column faithfulness_label: 1.5 is outside [0, 1]",
    ),
    "label not a number": (
        [{**_records()[0], "faithfulness_label": "yes"}],
        "line 1, column faithfulness_label: 'yes' is not a number",
    ),
    "unknown metric": ([{**r, "groundedness_label": 1} for r in _records()], "unknown metric 'groundedness'"),
    "row without a question": (
        [*_records()[:3], {**_records()[3], "user_input": " "}],
        "line 4 (id r3): missing question",
    ),
    "a label too large for a float": (
        [{**_records()[0], "faithfulness_label": 10**400}],
        "line 1, column faithfulness_label: 1000",
    ),
    "a label float() reads but nobody writes": (
        [{**_records()[0], "faithfulness_label": "0_1"}],
        "line 1, column faithfulness_label: '0_1' is not a number",
    ),
    "a misspelt label column": (
        [{**r, "Faithfulness_Label": 1} for r in _records()],
        "column Faithfulness_Label: not a label column name",
    ),
    "the same item labelled twice": (
        [*_records(), {**_records()[0], "id": "again", "faithfulness_label": 0}],
        "line 6: the same question, contexts, answer and ground truth as line 1; label each item once",
    ),
    "metric outside --metrics": (
        [{**r, "answer_relevance_label": 1} for r in _records()],
        "labels answer_relevance, not among --metrics (faithfulness)",
    ),
}


def _without_none(records):
    return [{k: v for k, v in r.items() if v is not None} for r in records]


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_labels_file_exits_2_in_one_line_and_stores_nothing(tmp_path, env, case):
    records, message = BAD_FILES[case]
    labels = _write(tmp_path / "labels.jsonl", _without_none(records))
    done = rag_eval(env, "calibrate", "--labels", labels, "--tenant", "acme", "--metrics", "faithfulness")
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and message in done.stderr
    assert not (_warehouse(env).root / "acme").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "give --labels FILE, --tenant T"),
        (("--tenant", "Acme Corp"), "invalid tenant name 'Acme Corp'"),
        (("--tenant", "acme", "--metrics", "faithfulness,bleu"), "unknown metric 'bleu'"),
        (("--tenant", "acme", "--k", "0"), "--k must be at least 1"),
        (("--tenant", "acme", "--k", "99999999999999999999"), "--k must be at most 10000"),
        (("--tenant", "acme", "--labels", "labels.txt"), "unsupported format '.txt'"),
        (("--tenant", "acme", "--labels", "missing.jsonl"), "does not exist"),
        (("--tenant", "acme", "--labels", "good.jsonl", "--judge", "llm", "--base-url", ""), "needs a base URL and a"),
    ],
)
def test_bad_arguments_exit_2_and_store_nothing(tmp_path, env, args, message):
    args = tuple(str(tmp_path / a) if a.endswith((".txt", ".jsonl")) else a for a in args)
    (tmp_path / "labels.txt").write_text(json.dumps(_records()[0]) + "\n")
    _write(tmp_path / "good.jsonl", _records())
    done = rag_eval(env, "calibrate", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (_warehouse(env).root / "acme").exists()


def test_a_bad_file_leaves_the_tenants_labels_and_calibration_as_they_were(tmp_path, env):
    good = _write(tmp_path / "good.jsonl", _records())
    assert rag_eval(env, "calibrate", "--labels", good, "--tenant", "acme", "--metrics", "faithfulness").returncode == 0
    store = _warehouse(env)
    labels_before = read_labels(store, "acme")
    summary_before = store.read_tenant_table("acme", FAITHFULNESS.table)
    bad = [{**r, "faithfulness_label": 0} for r in _records()[:3]] + [{**_records()[3], "faithfulness_label": -1}]
    done = rag_eval(env, "calibrate", "--labels", _write(tmp_path / "bad.jsonl", bad), "--tenant", "acme")
    assert done.returncode == 2 and "is outside [0, 1]" in done.stderr
    pd.testing.assert_frame_equal(read_labels(store, "acme"), labels_before)
    pd.testing.assert_frame_equal(store.read_tenant_table("acme", FAITHFULNESS.table), summary_before)


def test_a_judge_that_fails_stores_neither_the_files_labels_nor_a_calibration(tmp_path, env):
    """Reported: the file's labels were stored before the judge scored them, so a judge server that did not
    answer left them stored, and the tenant's calibration stale (which refuses a --decide-on ppi gate)."""
    good = _write(tmp_path / "good.jsonl", _records())
    assert rag_eval(env, "calibrate", "--labels", good, "--tenant", "acme", "--metrics", "faithfulness").returncode == 0
    store = _warehouse(env)
    labels_before, summary_before = read_labels(store, "acme"), store.read_tenant_table("acme", FAITHFULNESS.table)
    more = _write(tmp_path / "more.jsonl", [{**_records()[0], "response": "Refunds take 14 days.", "id": "new"}])
    unreachable = ("--judge", "llm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-retries", "0")
    done = rag_eval(env, "calibrate", "--labels", more, "--tenant", "acme", "--metrics", "faithfulness", *unreachable)
    assert done.returncode == 2 and "did not answer" in done.stderr, done.stderr
    assert "added to acme's labels" not in done.stdout
    pd.testing.assert_frame_equal(read_labels(store, "acme"), labels_before)
    pd.testing.assert_frame_equal(store.read_tenant_table("acme", FAITHFULNESS.table), summary_before)


def test_bad_input_is_one_line_on_stderr_from_the_console_script(tmp_path, env):
    labels = _write(tmp_path / "labels.jsonl", [{**_records()[0], "faithfulness_label": "maybe"}])
    done = rag_eval_process(env, "calibrate", "--labels", labels, "--tenant", "acme")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: labels file {labels}, line 1, column faithfulness_label: 'maybe' is not a number"
    ]


def test_two_imports_at_once_keep_both_files_labels_and_the_calibration_covers_them(tmp_path, env):
    first = _write(tmp_path / "first.jsonl", _records(ROWS[:2]))
    second = _write(tmp_path / "second.jsonl", _records(ROWS[2:]))
    # The warehouse's embedding cache exists first: two processes creating the SQLite file at once is another
    # matter (its WAL switch can fail "database is locked"); this test is about the labels.
    assert rag_eval(env, "calibrate", "--labels", first, "--metrics", "faithfulness").returncode == 0
    command = [RAG_EVAL, "calibrate", "--tenant", "acme", "--metrics", "faithfulness", "--labels"]
    processes = [
        subprocess.Popen([*command, path], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for path in (first, second)
    ]
    outputs = [process.communicate(timeout=PROCESS_TIMEOUT_S) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    store = _warehouse(env)
    labels = read_labels(store, "acme")
    assert sorted(labels["source"]) == ["first.jsonl"] * 2 + ["second.jsonl"] * 3
    calibration = load_calibration(store, "acme", FAITHFULNESS)
    assert calibration is not None and calibration.row("faithfulness")["n_labels"] == 5


@pytest.mark.postgres
def test_in_production_mode_a_tenants_calibration_is_invisible_to_another(
    tmp_path, env, upgraded_database, app_database
):
    from rag_eval_pipeline.stores.database import schema
    from rag_eval_pipeline.stores.database.results import DatabaseStore
    from rag_eval_pipeline_tests.support.postgres import run_admin

    a, b = f"cal-a-{uuid.uuid4().hex[:8]}", f"cal-b-{uuid.uuid4().hex[:8]}"
    production = {**env, "RAG_EVAL_DATABASE_URL": upgraded_database.app_url}
    labels = _write(tmp_path / "labels.jsonl", _records())
    done = rag_eval(production, "calibrate", "--labels", labels, "--tenant", a, "--metrics", "faithfulness")
    assert done.returncode == 0, done.stderr

    store = DatabaseStore(app_database)
    assert load_calibration(store, a, FAITHFULNESS) is not None
    assert len(read_labels(store, a)) == 5
    assert load_calibration(store, b, FAITHFULNESS) is None
    assert store.read_tenant_table(b, FAITHFULNESS.table) is None and read_labels(store, b).empty
    rows = run_admin(
        f"select tenant_id from {schema.SCHEMA}.result_tables where table_name = :name",
        upgraded_database.admin_url,
        name=FAITHFULNESS.table,
    )
    assert [row[0] for row in rows] == [a]  # stored in Postgres, as tenant a's row
    assert not (_warehouse(env).root / a).exists()  # and not in the local warehouse
    refused = rag_eval(production, "calibrate", "--tenant", b, "--metrics", "faithfulness")
    assert refused.returncode == 2 and f"tenant {b} has no labels" in refused.stderr
