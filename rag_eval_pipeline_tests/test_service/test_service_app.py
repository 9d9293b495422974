"""The service's door in process (FastAPI's test client): its OpenAPI document, and refusals that happen
before any store is opened (the stores of these settings do not exist: a request that reached them fails)."""

import asyncio
import logging

import pytest
from fastapi.testclient import TestClient

from rag_eval_pipeline import settings
from rag_eval_pipeline.service.app import AUDIT_LOGGER, create_app
from rag_eval_pipeline.service.tokens import TokenPolicy, TokenVerifier, issue, new_key

POLICY = TokenPolicy(issuer="rag-eval", audience="rag-eval-gate")


@pytest.fixture
def door(tmp_path):
    key = new_key().encode()
    app = create_app(settings.load({}, cwd=tmp_path / "nowhere"), TokenVerifier(POLICY, key=key))
    return TestClient(app), key


def test_the_openapi_document_lists_every_route_under_a_tenant(door):
    client, _ = door
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {
        "/v1/tenants/{tenant}/questions",
        "/v1/tenants/{tenant}/gates",
        "/v1/tenants/{tenant}/gates/{job_id}",
        "/v1/tenants/{tenant}/versions/{version}/runs/{run_id}/report",
        "/v1/tenants/{tenant}/baselines",
        "/v1/tenants/{tenant}/history",
        "/v1/tenants/{tenant}/reviews",
        "/v1/tenants/{tenant}/reviews/{version}",
    }
    assert all("HTTPBearer" in str(op.get("security")) for route in paths.values() for op in route.values())


@pytest.mark.parametrize(
    ("tenant", "scopes", "path", "status", "reason"),
    [
        (None, (), "/v1/tenants/acme/baselines", 401, "no bearer token"),
        ("acme", ("read",), "/v1/tenants/globex/baselines", 403, "the token is for tenant 'acme', not 'globex'"),
        ("acme", ("gate",), "/v1/tenants/acme/questions", 403, "the token of acme-ci lacks the 'read' scope"),
        ("acme", ("read", "gate"), "/v1/tenants/acme/reviews/v1", 403, "the token of acme-ci lacks the 'review' scope"),
    ],
)
def test_a_refusal_is_one_line_and_one_audit_line(door, caplog, tenant, scopes, path, status, reason):
    client, key = door
    headers = {"Authorization": f"Bearer {issue(key, POLICY, tenant, scopes, 60)}"} if tenant else {}
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        response = client.get(path, headers=headers)
    assert (response.status_code, response.json()) == (status, {"detail": reason})
    (line,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert line.startswith(f"refused {status} GET {path}") and line.endswith(reason)
    if status == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.cli
def test_each_command_runs_in_a_warm_child_that_runs_nothing_else(tmp_path):
    from rag_eval_pipeline.service.commands import CommandRunner

    async def scenario():
        runner = CommandRunner(limit=2, warm=1, environ={"PATH": "/usr/bin:/bin", "RAG_EVAL_TOKEN": "secret"})
        runner.warm_up()
        while not runner._warm:  # the child imports in the background
            await asyncio.sleep(0.1)
        warm = runner._warm[0]
        shown = await runner.run(["token", "issue", "--tenant", "acme"], {}, (), {})
        assert warm.returncode is not None  # that child ran this command and is gone
        while not runner._warm:
            await asyncio.sleep(0.1)
        assert runner._warm[0].pid != warm.pid  # a fresh one waits for the next
        helped = await runner.run(["baseline", "show", "--help"], {}, (), {})
        while not runner._warm:
            await asyncio.sleep(0.1)
        waiting = list(runner._warm)
        await runner.close()
        assert waiting and all(child.returncode == 0 for child in waiting)  # ended, having run nothing
        return shown, helped

    refused, helped = asyncio.run(scenario())
    # The child has neither the caller's token nor the signing key: it cannot mint a token.
    assert (refused.exit_code, refused.stderr) == (2, "error: RAG_EVAL_TOKEN_KEY_FILE is not set: "
                                                    "`rag-eval token new-key --out FILE` writes a key\n")  # fmt: skip
    assert helped.exit_code == 0 and "every promotion" in helped.stdout
