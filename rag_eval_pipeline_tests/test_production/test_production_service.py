"""The gate service in production mode: results in Postgres (the service's own role), tables in the object
store, and a CI job that holds only the service's URL and a token."""

import json
import os
import uuid

import pytest
from dagster import DagsterInstance
from sqlalchemy import create_engine, text

from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.support.gate_service import gate_service, token_for, write_key
from rag_eval_pipeline_tests.tenant_fixtures import lay_out_acme

pytestmark = [pytest.mark.dagster, pytest.mark.postgres, pytest.mark.cli]


def test_a_ci_token_gates_its_tenant_through_the_service_on_postgres(
    tmp_path, production_environment, upgraded_database
):
    tenant, other = f"acme-{uuid.uuid4().hex[:8]}", f"globex-{uuid.uuid4().hex[:8]}"
    documents_root = tmp_path / "documents"
    lay_out_acme(documents_root).rename(documents_root / tenant)
    workers = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAG_EVAL_")},
        **production_environment,  # the workers' role
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
    }
    for args in (
        ("register", "--tenant", tenant, "--version", "v1"),
        ("register", "--tenant", other, "--version", "v1"),
        ("run", "--tenant", tenant, "--version", "v1", "--job", "synthesis"),
        ("gate", "--tenant", tenant, "--candidate", "base", "--branch", "main"),
    ):
        done = rag_eval(workers, *args)
        assert done.returncode == 0, (args, done.stderr)
    service_env = {
        **workers,
        "RAG_EVAL_DATABASE_URL": upgraded_database.service_url,
        "RAG_EVAL_TOKEN_KEY_FILE": str(write_key(tmp_path / "token.key")),
    }
    with gate_service(service_env, tmp_path / "service.log") as url:
        ci = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_", "AWS_"))},
            "RAG_EVAL_SERVER": url,
            "RAG_EVAL_TOKEN": token_for(tmp_path / "token.key", tenant),
        }
        questions = tmp_path / "questions.jsonl"
        assert rag_eval(ci, "questions", "--tenant", tenant, "--out", str(questions)).returncode == 0
        records = [json.loads(line) for line in questions.read_text().splitlines()]
        outputs = tmp_path / "outputs.jsonl"
        outputs.write_text(
            "".join(json.dumps({**r, "answer": "I don't know.", "contexts": []}) + "\n" for r in records)
        )
        blocked = rag_eval(ci, "gate", "--tenant", tenant, "--candidate", "ci-bad", "--outputs", str(outputs))
        passed = rag_eval(ci, "gate", "--tenant", tenant, "--candidate", "ci-good")
        refused = rag_eval(ci, "baseline", "show", "--tenant", other)
    assert blocked.returncode == 1 and f"gate: BLOCK for commit ci-bad on {tenant}/v1" in blocked.stdout, blocked.stderr
    assert passed.returncode == 0 and f"gate: PASS for commit ci-good on {tenant}/v1" in passed.stdout, passed.stderr
    assert refused.returncode == 2 and "(403)" in refused.stderr

    engine = create_engine(upgraded_database.admin_url)
    with engine.connect() as connection:
        verdicts = dict(
            connection.execute(
                text("select commit, verdict from rag_eval.regression_reports where tenant_id = :t"), {"t": tenant}
            ).all()
        )
        written_as = connection.execute(
            text(
                "select count(*) from rag_eval.result_tables where tenant_id = :t and table_name = 'submitted_outputs'"
            ),
            {"t": tenant},
        ).scalar()
    engine.dispose()
    assert verdicts["ci-bad"] == "block" and verdicts["ci-good"] == "pass"
    assert written_as == 1  # the CI's answers, in the tenant's rows of the results database
    # and not in Dagster's run storage: the runs' configs name the submission, never an answer.
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        configs = [json.dumps(run.run_config) for run in instance.get_runs()]
    assert len(configs) == 4 and any("submitted-outputs:" in config for config in configs)
    assert not any("I don't know." in config for config in configs)
