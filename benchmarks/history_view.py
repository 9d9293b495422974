"""Build and cold-load time of the metric history view (`rag-eval history`), against our target: under 2 s
for 100 commits x 8 metrics, built and loaded cold in headless Chromium, locally and in production mode.

    .venv/bin/python benchmarks/history_view.py [--runs 5] [--commits 100] [--rows 1000000 --tenants 50]

Local (not timed: one tenant's `--commits` audits of 8 metrics stored in a temporary warehouse as the
regression_report asset stores them, by rag_eval_pipeline_tests/support/history.py: the real comparison,
report and store; a blocked commit about every 12th, a promotion about every 10th, an LLM-judged stretch
with tokens). Timed, median of `--runs`:
  build     tenant_history + render_history_html + the file written, in this process;
  cli       `rag-eval history --tenant T --out F` in a fresh process (imports included), as a person runs it;
  load      the written file in a fresh headless Chromium (empty profile and cache: cold), from driver.get
            until every metric's line is drawn and the document has loaded;
  peer      the plain regression report page of the latest audit, loaded the same way (one audit's page
            against a hundred audits').

Production (not timed: a database on the local Postgres, RAG_EVAL_BENCH_SERVER_URL, default the superuser on
127.0.0.1:5432, migrated, and the store benchmarks/rls_scores.py builds: `--rows` metric_scores rows over
`--tenants` tenants and `--commits` audited commits each, with their regression_reports rows; to each audit
this script adds its report table (a result_tables row, as a run stores it), a promotion every 10th commit
and a published manifest per tenant; the latest report of each tenant gets a real rendered page). Then
`rag-eval serve` as `rag_eval_service`, and, for a tenant drawn at random each run, timed:
  read      the history's reads alone (DatabaseStore through the tenant's transaction), in this process;
  service   GET /v1/tenants/T/history with a `read` token: the service reads and renders, over HTTP;
  cli       `rag-eval history` in a fresh process through the service (RAG_EVAL_SERVER, RAG_EVAL_TOKEN);
  load      the file it wrote, in a fresh headless Chromium, as above;
  peer      GET .../runs/R/report?format=html of the tenant's latest audit, and that page loaded cold.
The statement's plan (as the service's role, row-level security on) is recorded: it must reach the
(tenant_id, created_at) index of regression_reports and result_tables' primary key, never scan every tenant.

Writes benchmarks/results/history_view.json; drops the database and removes the files.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import httpx  # noqa: E402
import pandas as pd  # noqa: E402
import rls_scores  # noqa: E402
from sqlalchemy import create_engine, pool, text  # noqa: E402

from rag_eval_pipeline.reporting.history import render_history_html, tenant_history  # noqa: E402
from rag_eval_pipeline.reporting.report import HTML_FILE  # noqa: E402
from rag_eval_pipeline.stores import open_stores  # noqa: E402
from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore  # noqa: E402
from rag_eval_pipeline.stores.database.connection import open_results_database, parse_url  # noqa: E402
from rag_eval_pipeline.stores.database.results import DatabaseStore, latest_reports_query  # noqa: E402
from rag_eval_pipeline.stores.database.schema import SCHEMA, SERVICE_ROLE  # noqa: E402
from rag_eval_pipeline.stores.database.upgrade import upgrade  # noqa: E402
from rag_eval_pipeline_tests.dagster_ui import POLL_S, chromium  # noqa: E402
from rag_eval_pipeline_tests.support.gate_service import gate_service, token_for, write_key  # noqa: E402
from rag_eval_pipeline_tests.support.history import (  # noqa: E402
    METRICS,
    Planned,
    publish_version,
    store_audit,
)

RESULTS = REPO_ROOT / "benchmarks" / "results"
RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
TARGET_S = 2.0
TENANT, VERSION = "bench", "v1"
LLM_JUDGE = "llm:bench-model:decomposed:prompt-0000beef"
PRICES = "bench-model=0.5:1.5"

# Until every metric's line is drawn and the page has loaded; performance.now() counts from navigation start.
HISTORY_PROBE = """return {lines: document.querySelectorAll('path.metric-line').length,
 points: document.querySelectorAll('a.point-link').length, state: document.readyState, at: performance.now()};"""
REPORT_PROBE = """const h = document.querySelector('h1');
return {title: h ? h.innerText : '', state: document.readyState, at: performance.now()};"""


# --- shared -------------------------------------------------------------------------------------------------


def cold_load(url: str, probe: str, done, timeout: float = 60.0) -> dict:
    """One load in a Chromium of its own (empty profile and cache): wall and browser-clock seconds."""
    with chromium() as browser:
        driver = browser.driver
        started = time.perf_counter()
        driver.get(url)
        deadline = time.monotonic() + timeout
        while True:
            shown = driver.execute_script(probe)
            if done(shown):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not show what was awaited within {timeout:.0f} s: {shown}")
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
        version = browser.version
    return {"wall_s": wall, "browser_s": shown.pop("at") / 1000, "shown": shown, "chromium": version}


def history_done(lines: int):
    return lambda shown: shown["lines"] == lines and shown["state"] == "complete"


def report_done(shown: dict) -> bool:
    return shown["title"].startswith("Regression report") and shown["state"] == "complete"


def stats(values: list[float]) -> dict:
    rounded = [round(value, 3) for value in values]
    return {"median_s": round(statistics.median(values), 3), "max_s": max(rounded), "runs_s": rounded}


def timed_process(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return elapsed


def clean_env(**variables: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))}
    return {**base, **variables}


# --- local ----------------------------------------------------------------------------------------------------


def local_plan(commits: int, rng: random.Random) -> list[Planned]:
    """A year of a team's CI: small drifts, a blocked commit about every 12th, a promotion about every 10th
    passing commit, and an LLM-judged stretch (with tokens) in the second half."""
    level = {metric: 0.7 + 0.2 * rng.random() for metric in METRICS}
    plan = []
    for number in range(commits):
        means = {metric: round(min(1.0, max(0.0, level[metric] + rng.uniform(-0.02, 0.02))), 3) for metric in METRICS}
        blocked = number % 12 == 7
        if blocked:
            worse = rng.choice(METRICS)
            means[worse] = round(max(0.0, means[worse] - 0.25), 3)
        llm = number >= commits // 2
        tokens = {metric: (40, 40 * 600, 40 * 90) for metric in METRICS[:6]} if llm else {}
        plan.append(
            Planned(
                commit=f"{number:04d}{rng.getrandbits(64):016x}",
                means=means,
                judge=LLM_JUDGE if llm else "offline-support-v3",
                promote=number == 0 or (number % 10 == 0 and not blocked),
                rescored=llm and number == commits // 2,
                tokens=tokens,
                rescoring=(240, 240 * 600, 240 * 90) if llm and number == commits // 2 else (0, 0, 0),
            )
        )
    return plan


def local(args, scratch: Path) -> dict:
    warehouse = scratch / "warehouse"
    stores = open_stores(warehouse)
    publish_version(stores.results, TENANT, VERSION)
    started = time.perf_counter()
    plan = local_plan(args.commits, random.Random(5))
    for number, planned in enumerate(plan):
        store_audit(stores.results, stores.baselines, TENANT, VERSION, planned, number)
    setup_s = time.perf_counter() - started
    out = scratch / "history-local.html"
    env = clean_env(RAG_EVAL_WAREHOUSE=str(warehouse), DAGSTER_HOME=str(scratch / "home"), RAG_EVAL_PRICE_TABLE=PRICES)
    prices = {"bench-model": (0.5, 1.5)}
    history = tenant_history(stores.results, stores.baselines, TENANT, limit=args.commits, prices=prices)
    latest = history.points[-1]
    latest_report = Path(stores.results.report_location(TENANT, VERSION, latest.commit, latest.run_id)) / HTML_FILE
    runs: dict[str, list] = {"build": [], "cli": [], "load": [], "load_browser": [], "peer_load": []}
    shown = {}
    for _ in range(args.runs):
        started = time.perf_counter()
        built = tenant_history(stores.results, stores.baselines, TENANT, limit=args.commits, prices=prices)
        out.write_text(render_history_html(built), encoding="utf-8")
        runs["build"].append(time.perf_counter() - started)
        runs["cli"].append(timed_process([RAG_EVAL, "history", "--tenant", TENANT, "--out", str(out)], env))
        load = cold_load(out.as_uri(), HISTORY_PROBE, history_done(len(METRICS)))
        runs["load"].append(load["wall_s"])
        runs["load_browser"].append(load["browser_s"])
        shown = {**load["shown"], "chromium": load["chromium"]}
        peer = cold_load(latest_report.as_uri(), REPORT_PROBE, report_done)
        runs["peer_load"].append(peer["wall_s"])
    totals = [build + load for build, load in zip(runs["build"], runs["load"])]
    cli_totals = [cli + load for cli, load in zip(runs["cli"], runs["load"])]
    return {
        "audits": len(history.points),
        "metrics": len(history.metrics),
        "blocked": len(history.blocked),
        "promotions": len(history.promoted_points()),
        "page_bytes": out.stat().st_size,
        "setup_s": round(setup_s, 1),
        "shown": shown,
        "build": stats(runs["build"]),
        "cli": stats(runs["cli"]),
        "load": stats(runs["load"]),
        "load_browser_clock": stats(runs["load_browser"]),
        "build_plus_load": stats(totals),
        "cli_plus_load": stats(cli_totals),
        "peer_report_load": stats(runs["peer_load"]),
        "peer_report_bytes": latest_report.stat().st_size,
        "within_target": statistics.median(totals) < TARGET_S,
    }


# --- production ---------------------------------------------------------------------------------------------


def _tsv(values) -> str:
    return "\t".join("\\N" if value is None else str(value) for value in values) + "\n"


def report_template(rng: random.Random) -> tuple[pd.DataFrame, str, str]:
    """A real report of 8 metrics against a baseline (its table, Markdown and HTML), to vary per audit."""
    with tempfile.TemporaryDirectory(prefix="history-template-") as folder:
        stores = open_stores(Path(folder))
        publish_version(stores.results, "template", VERSION)
        first = {metric: 0.8 for metric in METRICS}
        store_audit(stores.results, stores.baselines, "template", VERSION, Planned("t-base", first, promote=True))
        second = {metric: round(0.8 + rng.uniform(-0.03, 0.03), 3) for metric in METRICS}
        run_id = store_audit(stores.results, stores.baselines, "template", VERSION, Planned("t-next", second), 1)
        table = stores.results.read_audit_table("template", VERSION, run_id, "regression_report")
        stored = stores.results.read_report("template", VERSION, run_id)
    assert table is not None and stored is not None
    return table, stored.markdown, stored.html


def add_reports(admin_url: str, tenants: list[str], commits: int, rng: random.Random) -> dict:
    """To rls_scores' store: each audit's report table, promotions, manifests, real pages for the latest audits."""
    template, markdown, html = report_template(rng)
    engine = create_engine(admin_url, poolclass=pool.NullPool)
    started = time.perf_counter()
    with engine.connect() as connection:
        verdicts = {
            (tenant, commit): (run_id, verdict, created)
            for tenant, commit, run_id, verdict, created in connection.execute(
                text(f"select tenant_id, commit, run_id, verdict, created_at from {SCHEMA}.regression_reports")
            )
        }
    raw = engine.raw_connection()
    counts = {"report_tables": 0, "promotions": 0, "manifests": 0}
    try:
        cursor = raw.cursor()
        for tenant in tenants:
            tables, promotions, manifests = io.StringIO(), io.StringIO(), io.StringIO()
            ours = sorted(((c, v) for (t, c), v in verdicts.items() if t == tenant), key=lambda item: item[1][2])
            for number, (commit, (run_id, verdict, created)) in enumerate(ours):
                frame = template.copy()
                candidate = [round(0.7 + 0.2 * rng.random(), 4) for _ in METRICS]
                baseline = [round(value - rng.uniform(-0.03, 0.03), 4) for value in candidate]
                frame["candidate_mean"] = candidate
                frame["baseline_mean"] = baseline
                frame["delta"] = [round(c - b, 4) for c, b in zip(candidate, baseline)]
                frame["verdict"] = "ok"
                if verdict == "block":
                    frame.loc[rng.randrange(len(METRICS)), ["delta", "verdict"]] = [-0.2, "regressed"]
                frame["verdict_overall"], frame["commit"] = verdict, commit
                buffer = io.BytesIO()
                frame.to_parquet(buffer, index=False)
                blob = "\\\\x" + buffer.getvalue().hex()
                tables.write(
                    _tsv((tenant, VERSION, "regression_report", commit, run_id, len(frame), blob, created.isoformat()))
                )
                counts["report_tables"] += 1
                if number % 10 == 0:
                    promoted = (created + timedelta(seconds=1)).isoformat()
                    reason = "first audited candidate" if number == 0 else "passed the gate on main"
                    promotions.write(_tsv((tenant, VERSION, commit, reason, "main", run_id, promoted)))
                    counts["promotions"] += 1
            manifest = {
                "tenant": tenant,
                "dataset_version": VERSION,
                "content_hash": "0" * 64,
                "n_items": 25,
                "counts_by_type": {"simple": 25},
                "published_at": "2026-01-01T00:00:00+00:00",
                "source": "synthesis",
                "parent_version": None,
            }
            manifests.write(_tsv((tenant, VERSION, "0" * 64, json.dumps(manifest).replace("\\", "\\\\"))))
            counts["manifests"] += 1
            for table, columns, buffer in (
                (
                    "result_tables",
                    "tenant_id, dataset_version, table_name, commit, run_id, row_count, parquet, created_at",
                    tables,
                ),
                (
                    "baseline_history",
                    "tenant_id, dataset_version, commit, reason, branch, run_id, created_at",
                    promotions,
                ),
                ("golden_manifests", "tenant_id, dataset_version, content_hash, manifest", manifests),
            ):
                buffer.seek(0)
                cursor.copy_expert(f"copy {SCHEMA}.{table} ({columns}) from stdin", buffer)
            latest = ours[-1]
            cursor.execute(
                f"update {SCHEMA}.regression_reports set markdown = %s, html = %s "
                "where tenant_id = %s and dataset_version = %s and commit = %s",
                (markdown, html, tenant, VERSION, latest[0]),
            )
            raw.commit()
        raw.set_session(autocommit=True)
        for table in ("result_tables", "baseline_history", "golden_manifests", "regression_reports"):
            cursor.execute(f"vacuum analyze {SCHEMA}.{table}")
    finally:
        raw.close()
        engine.dispose()
    return {**counts, "load_s": round(time.perf_counter() - started, 1)}


def plan_of(database, tenant: str, limit: int) -> list[str]:
    """The history statement's plan, as the service's role runs it (row-level security on)."""
    query = latest_reports_query(VERSION, limit)
    compiled = query.compile(dialect=database.engine.dialect, compile_kwargs={"literal_binds": True})
    with database.tenant(tenant) as connection:
        lines = connection.execute(text(f"explain {compiled}")).scalars().all()
    return [line.strip() for line in lines]


def production(args, scratch: Path) -> dict:
    server = parse_url(rls_scores.SERVER_URL, "RAG_EVAL_BENCH_SERVER_URL")
    name = f"rag_eval_history_bench_{os.getpid()}"
    admin = create_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'create database "{name}"'))
    admin_url = server.set(database=name).render_as_string(hide_password=False)
    service_url = server.set(database=name, username=SERVICE_ROLE, password=None).render_as_string(hide_password=False)
    rng = random.Random(11)
    try:
        upgrade(admin_url)
        tenants = [f"tenant-{number:03d}" for number in range(args.tenants)]
        print(f"loading {args.rows:,} score rows over {args.tenants} tenants ...", flush=True)
        loaded = rls_scores.load(admin_url, tenants, args.rows, args.commits)
        added = add_reports(admin_url, tenants, args.commits, rng)
        database = open_results_database(service_url)
        store = DatabaseStore(database)
        baselines = DatabaseBaselineStore(store)
        plan = plan_of(database, tenants[0], args.commits)
        env = clean_env(
            DAGSTER_HOME=str(scratch / "home"),
            RAG_EVAL_WAREHOUSE=str(scratch / "service-warehouse"),
            RAG_EVAL_DATABASE_URL=service_url,
            RAG_EVAL_TOKEN_KEY_FILE=str(write_key(scratch / "token.key")),
            RAG_EVAL_SERVICE_WARM_CHILDREN="0",
            RAG_EVAL_PRICE_TABLE=PRICES,
        )
        runs: dict[str, list] = {
            "read": [],
            "service": [],
            "cli": [],
            "load": [],
            "load_browser": [],
            "peer_fetch": [],
            "peer_load": [],
        }
        shown: dict = {}
        out = scratch / "history-production.html"
        with gate_service(env, scratch / "service.log") as url:
            for run in range(args.runs + 1):  # the first, untimed, warms the service's imports and pool
                tenant = rng.choice(tenants)
                token = token_for(scratch / "token.key", tenant, ("read",))
                headers = {"Authorization": f"Bearer {token}"}
                started = time.perf_counter()
                history = tenant_history(store, baselines, tenant, limit=args.commits)
                read_s = time.perf_counter() - started
                started = time.perf_counter()
                response = httpx.get(
                    f"{url}/v1/tenants/{tenant}/history", params={"limit": args.commits}, headers=headers, timeout=120
                )
                service_s = time.perf_counter() - started
                response.raise_for_status()
                ci = clean_env(RAG_EVAL_SERVER=url, RAG_EVAL_TOKEN=token)
                cli_s = timed_process(
                    [RAG_EVAL, "history", "--tenant", tenant, "--limit", str(args.commits), "--out", str(out)], ci
                )
                load = cold_load(out.as_uri(), HISTORY_PROBE, history_done(len(METRICS)))
                latest = history.points[-1].run_id
                started = time.perf_counter()
                page = httpx.get(
                    f"{url}/v1/tenants/{tenant}/versions/{VERSION}/runs/{latest}/report",
                    params={"format": "html"},
                    headers=headers,
                    timeout=60,
                )
                peer_fetch_s = time.perf_counter() - started
                page.raise_for_status()
                peer_file = scratch / "report-production.html"
                peer_file.write_text(page.text, encoding="utf-8")
                peer = cold_load(peer_file.as_uri(), REPORT_PROBE, report_done)
                if run == 0:
                    continue
                shown = {**load["shown"], "audits": len(history.points), "tenant": tenant}
                for key, value in (
                    ("read", read_s),
                    ("service", service_s),
                    ("cli", cli_s),
                    ("load", load["wall_s"]),
                    ("load_browser", load["browser_s"]),
                    ("peer_fetch", peer_fetch_s),
                    ("peer_load", peer["wall_s"]),
                ):
                    runs[key].append(value)
        database.dispose()
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'drop database if exists "{name}" with (force)'))
        admin.dispose()
    return {
        "data": {"tenants": args.tenants, "commits_per_tenant": args.commits, **loaded, **added},
        "shown": shown,
        "read": stats(runs["read"]),
        "service": stats(runs["service"]),
        "cli": stats(runs["cli"]),
        "load": stats(runs["load"]),
        "load_browser_clock": stats(runs["load_browser"]),
        "service_plus_load": stats([s + load for s, load in zip(runs["service"], runs["load"])]),
        "cli_plus_load": stats([c + load for c, load in zip(runs["cli"], runs["load"])]),
        "peer_report_fetch": stats(runs["peer_fetch"]),
        "peer_report_fetch_plus_load": stats([f + p for f, p in zip(runs["peer_fetch"], runs["peer_load"])]),
        "plan_as_service_role": plan,
        "within_target": statistics.median([s + load for s, load in zip(runs["service"], runs["load"])]) < TARGET_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each measurement (default 5)")
    parser.add_argument("--commits", type=int, default=100, help="audited commits per tenant (default 100)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="metric_scores rows of the production store")
    parser.add_argument("--tenants", type=int, default=50, help="tenants of the production store")
    parser.add_argument("--local-only", action="store_true", help="skip the production store")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="history-view-") as folder:
        scratch = Path(folder)
        print(f"local: storing {args.commits} audits of {len(METRICS)} metrics ...", flush=True)
        local_figures = local(args, scratch)
        production_figures = None if args.local_only else production(args, scratch)
    figures = {
        "command": "python benchmarks/history_view.py " + " ".join(sys.argv[1:]),
        "target_s": TARGET_S,
        "runs": args.runs,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_1m": {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)},
            "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        "chromium": local_figures["shown"].pop("chromium", ""),
        "local": local_figures,
        "production": production_figures,
        "note": "cold: a fresh Chromium with an empty profile per load, timed from driver.get until every metric's "
        "line is drawn and the document has loaded (the browser's start is not counted, as in ui_load.py); "
        "other jobs share the 2 cores, and the 1-minute load average is recorded",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "history_view.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
