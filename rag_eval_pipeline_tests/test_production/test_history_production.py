"""The metric history in production mode: two tenants' audits in the Postgres results store, and tenant A's
history, read through its own tenant-scoped transaction and through the gate service with A's token, holds none
of tenant B's commits; A's token cannot draw B's.

The audits are stored as regression_report stores them (support/history.py), by the workers' role; the service
connects as its own role (`rag_eval_service`), as in production.
"""

from __future__ import annotations

import os
import re
import uuid

import httpx
import pytest

from rag_eval_pipeline.reporting.history import tenant_history
from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore
from rag_eval_pipeline.stores.database.connection import open_results_database
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline_tests.support.cli import rag_eval
from rag_eval_pipeline_tests.support.gate_service import gate_service, token_for, write_key
from rag_eval_pipeline_tests.support.history import METRICS, Planned, publish_version, store_audits

pytestmark = [pytest.mark.postgres, pytest.mark.cli]


def _means(value: float, **overrides: float) -> dict[str, float]:
    return {metric: overrides.get(metric, value) for metric in METRICS}


@pytest.fixture(scope="module")
def tenants(upgraded_database):
    """Tenant A with three audits (a promotion, a pass, a blocked commit), tenant B with two of its own."""
    suffix = uuid.uuid4().hex[:8]
    a, b = f"hist-a-{suffix}", f"hist-b-{suffix}"
    database = open_results_database(upgraded_database.app_url)  # the workers' role writes them
    results = DatabaseStore(database)
    baselines = DatabaseBaselineStore(results)
    plans = {
        a: [
            Planned("a-one", _means(0.8), promote=True),
            Planned("a-two", _means(0.82), promote=True),
            Planned("a-blocked", _means(0.82, hit_rate=0.3)),
        ],
        b: [Planned("b-one", _means(0.6), promote=True), Planned("b-two", _means(0.9))],
    }
    runs = {}
    for tenant, plan in plans.items():
        publish_version(results, tenant, "v1")
        runs[tenant] = store_audits(results, baselines, tenant, "v1", plan)
    database.dispose()
    return {"a": a, "b": b, "runs": runs}


def test_a_tenants_history_reads_only_its_rows(tenants, upgraded_database):
    database = open_results_database(upgraded_database.service_url)  # as the gate service reads it
    try:
        results = DatabaseStore(database)
        history = tenant_history(results, DatabaseBaselineStore(results), tenants["a"])
    finally:
        database.dispose()
    assert [p.commit for p in history.points] == ["a-one", "a-two", "a-blocked"]
    assert [p.run_id for p in history.points] == tenants["runs"][tenants["a"]]
    assert [p.commit for p in history.blocked] == ["a-blocked"]
    assert [p.commit for p, _ in history.promoted_points()] == ["a-one", "a-two"]
    assert history.points[2].metrics["hit_rate"].delta == pytest.approx(-0.52)
    assert all(p.report == "" for p in history.points)  # a database row: no file a browser could open


@pytest.fixture(scope="module")
def service(tenants, upgraded_database, tmp_path_factory):
    root = tmp_path_factory.mktemp("history-service")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))},
        "DAGSTER_HOME": str(root / "home"),
        "RAG_EVAL_WAREHOUSE": str(root / "warehouse"),
        "RAG_EVAL_DATABASE_URL": upgraded_database.service_url,
        "RAG_EVAL_TOKEN_KEY_FILE": str(write_key(root / "token.key")),
        "RAG_EVAL_SERVICE_WARM_CHILDREN": "0",  # reads need no child
    }
    with gate_service(env, root / "service.log") as url:
        yield {"url": url, "key": root / "token.key", "root": root}


def _ci(service, tenant: str) -> dict:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))},
        "RAG_EVAL_SERVER": service["url"],
        "RAG_EVAL_TOKEN": token_for(service["key"], tenant, ("read",)),
    }


def test_through_the_service_a_token_draws_its_own_tenant_only(tenants, service, tmp_path):
    a, b = tenants["a"], tenants["b"]
    out = tmp_path / "a.html"
    drawn = rag_eval(_ci(service, a), "history", "--tenant", a, "--out", str(out))
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.splitlines() == [
        f"metric history of {a}/v1: 3 audits, 1 blocked, 2 promotions, {len(METRICS)} metrics",
        str(out.resolve()),
    ]
    html = out.read_text()
    assert all(commit in html for commit in ("a-one", "a-two", "a-blocked"))
    assert "b-one" not in html and "b-two" not in html and b not in html

    links = sorted(set(re.findall(r'href="(http[^"]+)"', html)))
    expected = [
        f"{service['url']}/v1/tenants/{a}/versions/v1/runs/{run}/report?format=html" for run in tenants["runs"][a]
    ]
    assert links == sorted(expected)
    token = token_for(service["key"], a, ("read",))
    opened = httpx.get(links[0], headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert opened.status_code == 200 and "Regression report" in opened.text  # the link resolves, with the token

    data = httpx.get(
        f"{service['url']}/v1/tenants/{a}/history",
        params={"format": "json", "limit": 2},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()
    assert [point["commit"] for point in data["points"]] == ["a-two", "a-blocked"]
    assert [point["blocked"] for point in data["points"]] == [False, True]

    refused = rag_eval(_ci(service, a), "history", "--tenant", b, "--out", str(tmp_path / "b.html"))
    assert refused.returncode == 2 and "(403)" in refused.stderr and not (tmp_path / "b.html").exists()
    unknown = rag_eval(_ci(service, a), "history", "--tenant", a, "--version", "v9", "--out", str(tmp_path / "v9.html"))
    assert unknown.returncode == 2 and f"{a}/v9 has no stored report yet" in unknown.stderr
    log = (service["root"] / "service.log").read_text()
    assert (
        f"allowed GET /v1/tenants/{a}/history tenant={a}" in log and f"refused 403 GET /v1/tenants/{b}/history" in log
    )
