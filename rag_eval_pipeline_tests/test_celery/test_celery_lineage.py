"""The whole lineage of two tenants, gated with `rag-eval` on two Celery workers in production mode, gives the
verdicts and scores of the in-process run, and no worker keeps anything on its disk."""

import re
import subprocess
import sys

import pandas as pd
import pytest

from rag_eval_pipeline.automation.queues import QUEUES
from rag_eval_pipeline.resources.warehouse import WarehouseResource
from rag_eval_pipeline.stores.database.upgrade import upgrade
from rag_eval_pipeline_tests.support.celery_workers import REPO_ROOT, celery_cluster
from rag_eval_pipeline_tests.support.postgres import APP_ROLE, database_url
from rag_eval_pipeline_tests.support.services import production_variables
from rag_eval_pipeline_tests.test_production.test_production_lineage import TENANTS, _gate_both, _lay_out

pytestmark = [pytest.mark.dagster, pytest.mark.postgres, pytest.mark.celery, pytest.mark.cli]

WORKERS = {"worker-a": (QUEUES["large"], QUEUES["small"]), "worker-b": (QUEUES["large"], QUEUES["small"])}
DEGRADED = "rag_eval_pipeline_tests.candidates:no_retrieval"
CODE = {"rag_eval_pipeline": "rag_eval_pipeline.definitions"}


def _gate_on_workers(env: dict, tenant: str, folder) -> subprocess.Popen:
    """What a tenant's CI does: its first full pipeline (the baseline); then it answers the golden questions
    with its own (degraded) code, here, and gates those outputs: the workers never run the tenant's code."""
    questions, outputs = folder / f"{tenant}-golden.jsonl", folder / f"{tenant}-outputs.jsonl"
    answer = (
        f"import json; from {DEGRADED.split(':')[0]} import {DEGRADED.split(':')[1]} as answer; "
        f"rows = [json.loads(line) for line in open('{questions}')]; "
        f"open('{outputs}', 'w').write(''.join(json.dumps(dict(qa_id=r['qa_id'], **answer(r['question'])))"
        " + chr(10) for r in rows))"
    )
    script = " && ".join(
        [
            f"rag-eval register --tenant {tenant} --version v1",
            f"rag-eval run --tenant {tenant} --version v1 --job full_pipeline --commit {tenant}-good",
            f"rag-eval review export --tenant {tenant} --version v1 --out {questions}",
            f'python -c "{answer}"',
            f"(rag-eval gate --tenant {tenant} --version v1 --candidate {tenant}-bad --outputs {outputs}; echo gate-exit=$?)",
        ]
    )
    return subprocess.Popen(
        ["bash", "-c", script], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )


def test_two_tenants_on_two_workers_match_the_in_process_run(
    tmp_path, monkeypatch, scratch_database_factory, s3_server
):
    documents_root = tmp_path / "documents"
    _lay_out(documents_root)
    name = scratch_database_factory()
    upgrade(database_url(name))
    app_url = database_url(name, user=APP_ROLE)
    common = {
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
        "RAG_EVAL_CANDIDATE_MODULES": "rag_eval_pipeline_tests",
        "RAG_EVAL_LARGE_TENANTS": "acme",
    }
    nowhere = tmp_path / "no-local-warehouse"  # production mode must never write here
    production = {
        **common,
        **production_variables(app_url, s3_server, "celery"),
        "RAG_EVAL_WAREHOUSE": str(nowhere),
    }

    with celery_cluster(tmp_path / "cluster", WORKERS, extra_env=production, code_locations=CODE) as cluster:
        env = {
            **cluster.env,
            "DAGSTER_HOME": str(cluster.home("ci")),
            "PATH": f"{sys.prefix}/bin:{cluster.env['PATH']}",
        }
        pipelines = {tenant: _gate_on_workers(env, tenant, tmp_path) for tenant in TENANTS}  # both CIs at once
        outputs = {tenant: process.communicate(timeout=600) for tenant, process in pipelines.items()}
        worker_logs = {name: worker.log_text() for name, worker in cluster.workers.items()}
    for tenant, (out, err) in outputs.items():
        assert "gate-exit=1" in out, f"{tenant}: {out}\n{err}"  # the degraded candidate is blocked
        assert f"# Regression report: {tenant} / v1 / commit {tenant}-good" in out  # read back from Postgres
        assert err.count("queued for a worker on rag-eval-") == 2, err  # both runs went to the workers

    embedded = _gate_both(monkeypatch, {**common, "RAG_EVAL_WAREHOUSE": str(tmp_path / "embedded")})
    resource = WarehouseResource(root=str(nowhere), database_url=app_url)
    baselines = resource.baselines()
    for tenant in TENANTS:
        for commit, in_process in zip((f"{tenant}-good", f"{tenant}-bad"), embedded[tenant]["scores"]):
            on_workers, _ = baselines.audited(tenant, "v1", commit)
            pd.testing.assert_frame_equal(on_workers, in_process, check_dtype=False)
        assert [(p.commit, p.reason) for p in baselines.history(tenant, "v1")] == embedded[tenant]["history"]

    ran_on = {name for name, log in worker_logs.items() if re.search(r"Task .*execute_job.* succeeded", log)}
    assert ran_on == set(WORKERS), worker_logs  # both workers took runs
    assert not nowhere.exists() or not any(nowhere.rglob("*"))  # nothing on a worker's disk
