"""Two tenants behind the real gate service (`rag-eval serve`): each CI job holds only the service's URL and
its tenant's token, and reaches only its own tenant.

The operator's environment (warehouse, Dagster home, signing key) is the service's; a CI job's
environment points its own warehouse and Dagster home at empty folders, so whatever it gets, it got
through the service. Every cross-tenant attempt the issue reported (export, promote, gate, history,
report) and every bad token is refused in one line and changes nothing of the other tenant's.
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import jwt
import pandas as pd
import pytest

from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline_tests.support.cli import RAG_EVAL, rag_eval
from rag_eval_pipeline_tests.support.gate_service import POLICY, gate_service, token_for, write_key
from rag_eval_pipeline_tests.tenant_fixtures import lay_out_acme, synthesize
from rag_eval_pipeline_tests.test_dagster.conftest import REPO_ROOT, cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

TENANTS = ("acme", "globex")


@pytest.fixture(scope="module")
def operator(tmp_path_factory, synthesized_acme_warehouse):
    """The operator's machine: acme and globex synthesized, each with the reference as its baseline."""
    root = tmp_path_factory.mktemp("operator")
    documents_root, warehouse_root = root / "documents", root / "warehouse"
    lay_out_acme(documents_root)
    shutil.copytree(documents_root / "acme", documents_root / "globex")
    shutil.copytree(synthesized_acme_warehouse, warehouse_root)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAG_EVAL_")},
        "DAGSTER_HOME": str(root / "home"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
        "RAG_EVAL_WAREHOUSE": str(warehouse_root),
        "RAG_EVAL_TOKEN_KEY_FILE": str(write_key(root / "token.key")),
        "PYTHONPATH": str(REPO_ROOT),
    }
    with cli_instance(env) as instance:
        register_partition(instance, "acme", "v1")
        synthesize(instance, documents_root, warehouse_root, "globex")
    for tenant in TENANTS:
        first = rag_eval(env, "gate", "--tenant", tenant, "--candidate", "base", "--branch", "main")
        assert first.returncode == 0 and "NO BASELINE YET" in first.stdout, first.stderr
    return {"env": env, "root": root, "key": Path(env["RAG_EVAL_TOKEN_KEY_FILE"]), "warehouse": warehouse_root}


@pytest.fixture(scope="module")
def service(operator):
    log = operator["root"] / "service.log"
    with gate_service(operator["env"], log) as url:
        yield {"url": url, "log": log}


@pytest.fixture
def ci_env(service, tmp_path):
    """A CI job's environment without its token: no store, no Dagster home, no key of the operator's."""

    def for_token(token: str) -> dict:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))},
            "RAG_EVAL_SERVER": service["url"],
            "RAG_EVAL_TOKEN": token,
            "RAG_EVAL_WAREHOUSE": str(tmp_path / "ci-warehouse"),
            "DAGSTER_HOME": str(tmp_path / "ci-home"),
        }

    return for_token


def _declining(qa_ids) -> str:
    """Answers to these golden questions that decline and cite nothing: a regression on the reference."""
    return "".join(json.dumps({"qa_id": q, "answer": "I don't know.", "contexts": []}) + "\n" for q in qa_ids)


def _acme_qa_ids(operator) -> list[str]:
    return pd.read_parquet(operator["warehouse"] / "acme" / "v1" / "golden_set.parquet")["qa_id"].tolist()


def _verdict_line(stdout: str, commit: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("gate: ")]
    return line.replace(commit, "<commit>")


def _report_table(stdout: str, warehouse: Path) -> pd.DataFrame:
    """The report table beside the report the gate names (the service names its warehouse `<warehouse>`)."""
    (line,) = [line for line in stdout.splitlines() if line.startswith("report: ")]
    path = Path(line.removeprefix("report: ").replace("<warehouse>", str(warehouse)))
    table = pd.read_parquet(path.with_name("regression_report.parquet"))
    return table[["metric", "verdict", "candidate_mean", "baseline_mean"]]


def test_a_ci_token_gates_its_own_tenant_exactly_as_the_cli_does(operator, service, ci_env, tmp_path):
    ci = ci_env(token_for(operator["key"], "acme"))
    asked = rag_eval(ci, "questions", "--tenant", "acme", "--out", str(tmp_path / "questions.jsonl"))
    assert asked.returncode == 0, asked.stderr
    questions = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert sorted(q["qa_id"] for q in questions) == sorted(_acme_qa_ids(operator))
    assert all(set(q) == {"qa_id", "question"} for q in questions)  # no ground truth for a CI token
    here = rag_eval(operator["env"], "questions", "--tenant", "acme", "--out", str(tmp_path / "here.jsonl"))
    assert here.returncode == 0 and (tmp_path / "here.jsonl").read_text() == (tmp_path / "questions.jsonl").read_text()
    unknown = rag_eval(ci, "questions", "--tenant", "acme", "--version", "v9", "--out", str(tmp_path / "v9.jsonl"))
    assert unknown.returncode == 2 and "acme/v9 has no published golden set" in unknown.stderr

    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(_declining(q["qa_id"] for q in questions))
    junit = tmp_path / "junit.xml"
    remote = rag_eval(ci, "gate", "--tenant", "acme", "--candidate", "served-1", "--outputs", str(outputs),
                      "--junit", str(junit))  # fmt: skip
    local = rag_eval(operator["env"], "gate", "--tenant", "acme", "--candidate", "local-1", "--outputs", str(outputs))
    assert (remote.returncode, local.returncode) == (1, 1), remote.stderr + local.stderr
    assert _verdict_line(remote.stdout, "served-1") == _verdict_line(local.stdout, "local-1")
    assert "BLOCK" in _verdict_line(remote.stdout, "served-1")
    assert "report: <warehouse>/acme/v1/audits/" in remote.stdout  # not the operator's disk layout
    pd.testing.assert_frame_equal(
        _report_table(remote.stdout, operator["warehouse"]), _report_table(local.stdout, operator["warehouse"])
    )
    assert f"JUnit XML: {junit}" in remote.stdout and "<failure" in junit.read_text()

    ppi = rag_eval(ci, "gate", "--tenant", "acme", "--candidate", "served-2", "--outputs", str(outputs),
                   "--decide-on", "ppi")  # fmt: skip
    assert ppi.returncode == 2 and "needs human labels of tenant acme" in ppi.stderr  # acme labelled nothing


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_every_cross_tenant_attempt_and_bad_token_is_refused_and_changes_nothing(operator, service, ci_env, tmp_path):
    globex = operator["warehouse"] / "globex"
    before = _snapshot(globex)
    acme_ci = ci_env(token_for(operator["key"], "acme"))
    acme_all = ci_env(token_for(operator["key"], "acme", ("read", "gate", "promote", "review")))
    stolen = tmp_path / "stolen.jsonl"
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text('{"qa_id": "x", "answer": "a", "contexts": []}\n')
    other_key = write_key(tmp_path / "other.key")
    expired = token_for(operator["key"], "globex", ttl_s=-60)
    forged = token_for(other_key, "globex", ("read", "gate", "promote", "review"))
    wrong_audience = jwt.encode(
        {"iss": POLICY.issuer, "aud": "other", "sub": "x", "tenant": "globex", "scope": "read", "iat": 0,
         "exp": 2**31},
        operator["key"].read_bytes().strip(),
        algorithm="HS256",
    )  # fmt: skip
    unsigned = jwt.encode({"tenant": "globex"}, None, algorithm="none")  # pyright: ignore[reportArgumentType]
    attempts = [
        (acme_all, ("review", "export", "--tenant", "globex", "--version", "v1", "--out", str(stolen)), "403"),
        (acme_all, ("baseline", "promote", "--tenant", "globex", "--commit", "base"), "403"),
        (acme_ci, ("gate", "--tenant", "globex", "--candidate", "evil", "--outputs", str(outputs)), "403"),
        (acme_ci, ("baseline", "show", "--tenant", "globex"), "403"),
        (acme_ci, ("questions", "--tenant", "globex", "--out", str(stolen)), "403"),
        (acme_ci, ("baseline", "promote", "--tenant", "acme", "--commit", "base"), "lacks the 'promote' scope"),
        (acme_ci, ("review", "export", "--tenant", "acme", "--version", "v1", "--out", str(stolen)), "'review'"),
        (ci_env(expired), ("baseline", "show", "--tenant", "globex"), "expired"),
        (ci_env(forged), ("baseline", "promote", "--tenant", "globex", "--commit", "base"), "signature"),
        (ci_env(wrong_audience), ("baseline", "show", "--tenant", "globex"), "another audience"),
        (ci_env(unsigned), ("baseline", "show", "--tenant", "globex"), "'none'"),
    ]
    for env, args, why in attempts:
        refused = rag_eval(env, *args)
        assert refused.returncode == 2, (args, refused.stdout)
        assert refused.stderr.startswith("error: the gate service refused") and why in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and refused.stdout == ""
    headers = {"Authorization": f"Bearer {token_for(operator['key'], 'acme')}"}
    report = httpx.get(f"{service['url']}/v1/tenants/globex/versions/v1/runs/any/report", headers=headers)
    anonymous = httpx.get(f"{service['url']}/v1/tenants/globex/baselines")
    assert (report.status_code, anonymous.status_code) == (403, 401)
    # A value that looks like an option stays a value: the gate is acme's, whatever its commit says. And a
    # token without `promote` never moves the baseline, whichever branch it says it gates, however lax.
    history = httpx.get(f"{service['url']}/v1/tenants/acme/baselines", headers=headers).json()
    lax = {"branch": "x", "main_branch": "x", "tolerance": 1.0, "min_coverage": 0.0}
    smuggled = httpx.post(
        f"{service['url']}/v1/tenants/acme/gates",
        params={"wait": 300},
        headers=headers,
        json={"commit": "--tenant=globex", **lax, "outputs_jsonl": _declining(_acme_qa_ids(operator))},
        timeout=400,
    ).json()
    assert smuggled["state"] == "finished", smuggled
    assert "for commit --tenant=globex on acme/v1" in smuggled["stdout"]
    assert "is now the baseline" not in smuggled["stdout"]
    after = httpx.get(f"{service['url']}/v1/tenants/acme/baselines", headers=headers).json()
    assert after["promotions"] == history["promotions"] and "--tenant=globex" in after["audited"]["v1"]
    assert not stolen.exists()
    assert _snapshot(globex) == before
    refusals = [line for line in service["log"].read_text().splitlines() if " audit refused " in line]
    assert len(refusals) >= len(attempts) + 2
    assert any("refused 403 POST /v1/tenants/globex/gates tenant=acme" in line for line in refusals)


def test_two_tenants_gate_at_once_through_the_service(operator, service, ci_env):
    started = {
        tenant: subprocess.Popen(
            [RAG_EVAL, "gate", "--tenant", tenant, "--candidate", f"both-{tenant}"],
            env=ci_env(token_for(operator["key"], tenant)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tenant in TENANTS
    }
    for tenant, process in started.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert f"gate: PASS for commit both-{tenant} on {tenant}/v1" in out
        assert f"<warehouse>/{tenant}/" in [line for line in out.splitlines() if line.startswith("report: ")][0]


def test_scoped_tokens_review_and_promote_only_their_own_tenant(operator, service, ci_env, tmp_path):
    reviewer = ci_env(token_for(operator["key"], "globex", ("review",)))
    sheet = tmp_path / "globex-review.jsonl"
    exported = rag_eval(reviewer, "review", "export", "--tenant", "globex", "--version", "v1", "--out", str(sheet))
    assert exported.returncode == 0, exported.stderr
    assert f"written to {sheet}" in exported.stdout
    rows = [json.loads(line) for line in sheet.read_text().splitlines()]
    assert rows and all("ground_truth" in row for row in rows)
    promoter = ci_env(token_for(operator["key"], "globex", ("promote", "read")))
    promoted = rag_eval(promoter, "baseline", "promote", "--tenant", "globex", "--commit", "base")
    assert promoted.returncode == 0, promoted.stderr
    assert "base is now the baseline of globex/v1" in promoted.stdout
    history = rag_eval(promoter, "baseline", "show", "--tenant", "globex")
    local = rag_eval(operator["env"], "baseline", "show", "--tenant", "globex")
    assert history.returncode == 0 and history.stdout == local.stdout
