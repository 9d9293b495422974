"""`rag-eval prune` on the embedded mode: old audits, orphaned outputs and old Dagster runs of one tenant go;
baselines, golden sets, a version's own tables, recent audits, runs in progress and other tenants stay."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dagster import DagsterRunStatus

from rag_eval_pipeline.evaluation.submissions import submit_outputs
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.support.retention import add_run, age_files, age_runs
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

FINISHED = re.compile(r"^run (\S+) \(audit\) finished", re.MULTILINE)
RECORDS = [{"qa_id": "none-such", "answer": "An answer.", "contexts": []}]


def _gate(env: dict, commit: str, outputs: Path, *extra: str) -> str:
    completed = rag_eval(env, "gate", "--tenant", "acme", "--candidate", commit, "--outputs", str(outputs), *extra)
    found = FINISHED.search(completed.stdout)
    assert completed.returncode in (0, 1) and found, completed.stderr
    return found.group(1)


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def _lines(completed) -> list[str]:
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip().splitlines()


@pytest.fixture
def aged(synthesized_cli_env, tmp_path):
    """acme/v1 after three gates (base, the baseline; old; recent), an orphaned submission and one still in use
    by a run in progress; everything but `recent` dated back 200 days; and globex's own old submission."""
    env = synthesized_cli_env
    warehouse = Warehouse(env["RAG_EVAL_WAREHOUSE"])
    golden = warehouse.read("acme", "v1", "golden_set")
    records = [{"qa_id": qa_id, "answer": "Ninety days.", "contexts": []} for qa_id in golden["qa_id"]]
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    runs = {"base": _gate(env, "base", outputs, "--branch", "main")}  # the first audit on main: the baseline
    runs.update({commit: _gate(env, commit, outputs) for commit in ("old", "recent")})
    orphan = submit_outputs(warehouse, "acme", "v1", "orphan", RECORDS)
    in_use = submit_outputs(warehouse, "acme", "v1", "inflight", RECORDS)
    theirs = submit_outputs(warehouse, "globex", "v1", "old", RECORDS)
    with cli_instance(env) as instance:
        register_partition(instance, "globex", "v1")
        runs["inflight"] = add_run(instance, "acme", "inflight", DagsterRunStatus.STARTED, str(in_use))
        age_runs(instance, [runs["base"], runs["old"], runs["inflight"]])
    partition = warehouse.partition_dir("acme", "v1")
    old = [p for p in partition.glob("audits/commit=*/run=*") if p.parent.name != "commit=recent"]
    old += [p for p in partition.glob("submissions/commit=*/*.jsonl") if p.parent.name != "commit=recent"]
    age_files([*old, warehouse.partition_dir("globex", "v1")])
    age_files(partition.glob("*.*"))  # the version's own tables and manifest: old too, and kept
    return env, warehouse, runs, {"orphan": orphan.value, "in_use": in_use.value, "theirs": theirs.value}


def test_prune_removes_old_audits_orphans_and_runs_and_keeps_the_rest(aged):
    env, warehouse, runs, submissions = aged
    root = warehouse.root
    before = _files(root)

    dry = _lines(rag_eval(env, "prune", "--tenant", "acme", "--dry-run"))

    assert [line.split(" (")[0] for line in dry] == [
        "would remove 1 audits of acme older than 90 days",
        "would remove 2 submitted outputs of acme older than 90 days",
        "would remove 1 Dagster runs of acme older than 90 days",
    ]
    assert all(re.search(r"\([1-9][\d,]* bytes\)$", line) for line in dry), dry
    assert _files(root) == before  # a dry run deletes nothing
    with cli_instance(env) as instance:
        assert all(instance.get_run_by_id(run_id) is not None for run_id in runs.values())

    removed = _lines(rag_eval(env, "prune", "--tenant", "acme"))

    assert [line.replace("would remove", "removed") for line in dry] == removed
    partition = warehouse.partition_dir("acme", "v1")
    assert not list(partition.glob(f"audits/commit=old/run={runs['old']}"))
    for commit in ("base", "recent"):  # the baseline, whatever its age; a recent audit
        assert (partition / "audits" / f"commit={commit}" / f"run={runs[commit]}" / "audit.json").is_file()
    left = {path.stem for path in partition.glob("submissions/commit=*/*.jsonl")}
    assert submissions["orphan"] not in left and submissions["in_use"] in left  # the run in progress keeps its own
    assert len(left) == 3  # base's, recent's and the one in use
    assert {name for name in before if "/" not in name.removeprefix("acme/v1/")} <= _files(root)  # own tables
    assert {name for name in before if name.startswith("globex/")} <= _files(root)  # another tenant's
    with cli_instance(env) as instance:
        assert instance.get_run_by_id(runs["old"]) is None
        assert all(instance.get_run_by_id(runs[commit]) is not None for commit in ("base", "recent", "inflight"))

    shown = rag_eval(env, "baseline", "show", "--tenant", "acme")
    assert "audited on v1: base, recent" in shown.stdout
    again = _lines(rag_eval(env, "prune", "--tenant", "acme"))
    assert [line.split(" (")[0] for line in again] == [
        "removed 0 audits of acme older than 90 days",
        "removed 0 submitted outputs of acme older than 90 days",
        "removed 0 Dagster runs of acme older than 90 days",
    ]


def test_the_retention_comes_from_the_option_else_the_tenant_else_the_default(aged):
    env = aged[0]
    kept_a_year = {**env, "RAG_EVAL_RETENTION_DAYS_BY_TENANT": "globex=30,acme=365"}
    lines = _lines(rag_eval(kept_a_year, "prune", "--tenant", "acme", "--dry-run"))
    assert lines[0].startswith("would remove 0 audits of acme older than 365 days")
    longer = _lines(rag_eval(env, "prune", "--tenant", "acme", "--dry-run", "--older-than-days", "1000"))
    assert longer[1].startswith("would remove 0 submitted outputs of acme older than 1000 days")
    kept_long = {**env, "RAG_EVAL_RETENTION_DAYS": "500"}
    assert _lines(rag_eval(kept_long, "prune", "--tenant", "acme", "--dry-run"))[2].startswith(
        "would remove 0 Dagster runs of acme older than 500 days"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tenant", "ghost"], "error: unknown tenant 'ghost' (registered: acme): nothing to prune"),
        (["--tenant", "Acme"], "invalid tenant name 'Acme'"),
        (["--tenant", "acme", "--older-than-days", "0"], "0 is not in the range x>=1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(synthesized_cli_env, args, message):
    completed = rag_eval(synthesized_cli_env, "prune", *args)

    assert completed.returncode == 2 and completed.stdout == ""
    assert message in completed.stderr and len(completed.stderr.strip().splitlines()) == 1
