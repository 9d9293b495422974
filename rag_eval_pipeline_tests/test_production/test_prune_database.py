"""`rag-eval prune` in production mode: a tenant's old audits and orphaned outputs go from Postgres (as the
pipeline's role, under row-level security) and its old Dagster runs from the instance; baselines, golden
sets and manifests, a version's own tables, recent audits, runs in progress and other tenants stay."""

from __future__ import annotations

import os
import uuid

import pandas as pd
import pytest
from dagster import DagsterRunStatus

from rag_eval_pipeline.core.judging.results import SCORE_COLUMNS
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.stores.database.retention import AUDIT_ROW_TABLES
from rag_eval_pipeline.stores.layout import MANIFEST_FILE, StoredReport
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.support.postgres import run_admin
from rag_eval_pipeline_tests.support.retention import OLD_DAYS, add_run, age_runs
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.postgres, pytest.mark.cli]

KEPT_TABLES = (*AUDIT_ROW_TABLES, schema.golden_manifests, schema.baseline_history)


def _audit(store: DatabaseStore, baselines: DatabaseBaselineStore, tenant: str, commit: str) -> str:
    """One whole audit of commit (scores, outputs, report, archive marker) and its submission; the run id."""
    run_id = f"run-{commit}"
    row = {"qa_id": "q1", "metric": "faithfulness", "score": 1.0, "status": "ok", "evidence": "{}", "judge": "offline"}
    scores = pd.DataFrame(
        [{**dict.fromkeys(SCORE_COLUMNS, ""), **row, "k": 5, "commit": commit}], columns=SCORE_COLUMNS
    )
    outputs = pd.DataFrame({"qa_id": ["q1"], "answer": [f"the answer of {commit}"], "commit": [commit]})
    baselines.archive(tenant, "v1", commit, scores, outputs, run_id)
    store.write_report(tenant, "v1", commit, run_id, StoredReport("pass", {}, "# report", "<p>"), {"tolerance": 0.05})
    store.write_submission(tenant, "v1", commit, uuid.uuid4().hex, '{"qa_id": "q1", "answer": "a"}')
    return run_id


def _lay_out(store: DatabaseStore, baselines: DatabaseBaselineStore, tenant: str) -> dict[str, str]:
    """A published v1, audits of base (the baseline), old and recent, an orphaned submission and one in use."""
    store.write(tenant, "v1", "golden_set", pd.DataFrame({"qa_id": ["q1"], "question": ["How long?"]}))
    store.write_text(tenant, "v1", MANIFEST_FILE, '{"content_hash": "0f0f"}')
    runs = {commit: _audit(store, baselines, tenant, commit) for commit in ("base", "old", "recent")}
    baselines.promote(tenant, "v1", "base", "first audit", "main", runs["base"])
    for commit in ("orphan", "inflight"):
        runs[commit] = uuid.uuid4().hex
        store.write_submission(tenant, "v1", commit, runs[commit], '{"qa_id": "q1", "answer": "a"}')
    return runs


def _age(database, tenant: str) -> None:
    """Everything of tenant but the `recent` audit dated back, as an administrator would."""
    for table in KEPT_TABLES:
        recent = " and commit <> 'recent'" if "commit" in table.c else ""
        run_admin(
            f"update {schema.SCHEMA}.{table.name} set created_at = now() - interval '{OLD_DAYS} days' "
            f"where tenant_id = :tenant{recent}",
            database.admin_url,
            tenant=tenant,
        )


def _rows(database, tenant: str) -> dict[str, list[tuple]]:
    """Every row key of tenant in each table, as the superuser sees them."""
    found = {}
    for table in KEPT_TABLES:
        columns = ", ".join(c for c in ("dataset_version", "table_name", "commit", "run_id") if c in table.c)
        found[table.name] = sorted(
            tuple(row)
            for row in run_admin(
                f"select {columns} from {schema.SCHEMA}.{table.name} where tenant_id = :tenant",
                database.admin_url,
                tenant=tenant,
            )
        )
    return found


def test_prune_in_production_mode(tmp_path, upgraded_database, app_database):
    tenant, other = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("initech", "hooli"))
    store = DatabaseStore(app_database)
    baselines = DatabaseBaselineStore(store)
    runs = _lay_out(store, baselines, tenant)
    _lay_out(store, baselines, other)
    for name in (tenant, other):
        _age(upgraded_database, name)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
        "RAG_EVAL_DATABASE_URL": upgraded_database.app_url,
    }
    with cli_instance(env) as instance:
        register_partition(instance, tenant, "v1")
        dagster_runs = {
            "old": add_run(instance, tenant, "old", DagsterRunStatus.SUCCESS),
            "base": add_run(instance, tenant, "base", DagsterRunStatus.SUCCESS),
            "inflight": add_run(
                instance, tenant, "inflight", DagsterRunStatus.STARTING, f"submitted-outputs:{runs['inflight']}"
            ),
            "recent": add_run(instance, tenant, "recent", DagsterRunStatus.FAILURE),
            "theirs": add_run(instance, other, "old", DagsterRunStatus.SUCCESS),
        }
        age_runs(instance, [run for name, run in dagster_runs.items() if name != "recent"])
    before, before_theirs = _rows(upgraded_database, tenant), _rows(upgraded_database, other)

    dry = rag_eval(env, "prune", "--tenant", tenant, "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert [line.split(" (")[0] for line in dry.stdout.splitlines()] == [
        f"would remove 1 audits of {tenant} older than 90 days",
        f"would remove 2 submitted outputs of {tenant} older than 90 days",
        f"would remove 1 Dagster runs of {tenant} older than 90 days",
    ]
    assert not [line for line in dry.stdout.splitlines()[:2] if "(0 bytes)" in line]  # recorded runs log nothing
    assert _rows(upgraded_database, tenant) == before

    removed = rag_eval(env, "prune", "--tenant", tenant)

    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == dry.stdout.replace("would remove", "removed")
    after = _rows(upgraded_database, tenant)
    gone = {name: sorted(set(before[name]) - set(after[name])) for name in before}
    assert (
        gone["audited_archives"]
        == gone["regression_reports"]
        == gone["test_parameters"]
        == [("v1", "old", runs["old"])]
    )
    assert sorted(key[1:3] for key in gone["result_tables"]) == [
        ("candidate_outputs", "old"),
        ("metric_scores", "old"),
        ("submitted_outputs", "old"),
        ("submitted_outputs", "orphan"),
    ]
    assert gone["metric_scores"] == [("v1", "old", runs["old"])]
    assert gone["golden_manifests"] == gone["baseline_history"] == []
    assert ("v1", "golden_set", "", "") in after["result_tables"]  # the version's own table, however old
    assert ("v1", "submitted_outputs", "inflight", runs["inflight"]) in after["result_tables"]  # its run is starting
    assert _rows(upgraded_database, other) == before_theirs  # another tenant's rows: untouched
    assert baselines.audited_commits(tenant, "v1") == ["base", "recent"]
    with cli_instance(env) as instance:
        assert instance.get_run_by_id(dagster_runs["old"]) is None
        assert all(instance.get_run_by_id(dagster_runs[name]) for name in ("base", "inflight", "recent", "theirs"))
