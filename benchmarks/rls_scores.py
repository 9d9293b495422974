"""What row-level security costs the results database's two hot reads, at production size.

    .venv/bin/python benchmarks/rls_scores.py [--rows 1000000 --tenants 50 --commits 100 --reps 200]

Makes its own database on the local Postgres (RAG_EVAL_BENCH_SERVER_URL, default the superuser on
127.0.0.1:5432), migrates it, and loads `--rows` metric_scores rows spread over `--tenants` tenants and
`--commits` audited commits per tenant (COPY, as the superuser), with one regression_reports row per commit.
Then times, as rag_eval_app through `ResultsDatabase.tenant()` (RLS on, the tenant from the setting):
  (a) reports: a tenant's latest 50 regression reports (listing columns, no Markdown/HTML),
  (b) history: its mean score per commit and metric over its latest 100 commits (each commit's scores
      aggregated in a LATERAL subquery; `metric_history_join_first` is the same result joined first,
      which sorts all ~20,000 rows and is about twice as slow);
and, as the peer in the same run, the same queries on the superuser's connection (RLS bypassed) with an
explicit `tenant_id = ...`. Each timing is a whole transaction as the pipeline runs it (pool checkout with
its ping, BEGIN, the query, COMMIT); RLS's also sets the tenant. The two sides alternate, tenant by
tenant, and must return the same rows. Writes benchmarks/results/rls_scores.json; drops the database.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import create_engine, pool, text  # noqa: E402

from rag_eval_pipeline.stores.database.connection import build_engine, open_results_database, parse_url  # noqa: E402
from rag_eval_pipeline.stores.database.schema import APP_ROLE, SCHEMA  # noqa: E402
from rag_eval_pipeline.stores.database.upgrade import upgrade  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
SERVER_URL = os.environ.get("RAG_EVAL_BENCH_SERVER_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
METRICS = (
    "faithfulness",
    "answer_relevance",
    "context_recall",
    "context_precision",
    "contextual_relevancy",
    "answer_correctness",
    "hit_rate",
    "mrr",
)
VERSION = "v1"
TARGET_P95_MS = 50.0
SCORE_COLUMNS = (
    "tenant_id",
    "dataset_version",
    "commit",
    "run_id",
    "row_no",
    "qa_id",
    "metric",
    "score",
    "status",
    "reason",
    "evidence",
    "judge",
    "k",
    "created_at",
)
REPORT_COLUMNS = (
    "tenant_id",
    "dataset_version",
    "commit",
    "run_id",
    "verdict",
    "summary",
    "markdown",
    "html",
    "created_at",
)

LATEST_REPORTS = """
select commit, run_id, verdict, summary, created_at from {schema}.regression_reports
where dataset_version = :version {tenant}
order by created_at desc limit 50"""
# Aggregates each commit's ~200 rows on its own (LATERAL), then orders 100 x 8 groups: the shape to use.
HISTORY = """
with recent as (
  select commit, run_id, created_at from {schema}.regression_reports
  where dataset_version = :version {tenant}
  order by created_at desc limit 100)
select r.commit, s.metric, s.mean, s.measured
from recent r cross join lateral (
  select m.metric, avg(m.score) as mean, count(m.score) as measured from {schema}.metric_scores m
  where m.dataset_version = :version and m.commit = r.commit and m.run_id = r.run_id {score_tenant}
  group by m.metric) s
order by r.created_at, s.metric"""
# The same result by joining first: sorts all ~20,000 score rows before grouping them. Kept as a contrast.
HISTORY_JOIN_FIRST = """
with recent as (
  select commit, run_id, created_at from {schema}.regression_reports
  where dataset_version = :version {tenant}
  order by created_at desc limit 100)
select r.commit, m.metric, avg(m.score) as mean, count(m.score) as measured
from recent r join {schema}.metric_scores m
  on m.dataset_version = :version and m.commit = r.commit and m.run_id = r.run_id {score_tenant}
group by r.commit, r.created_at, m.metric
order by r.created_at, m.metric"""


def queries(explicit_tenant: bool) -> dict[str, text]:
    """The two reads; the peer adds the tenant filter that RLS adds on its own."""
    tenant = "and tenant_id = :tenant" if explicit_tenant else ""
    score_tenant = "and m.tenant_id = :tenant" if explicit_tenant else ""
    return {
        "latest_reports": text(LATEST_REPORTS.format(schema=SCHEMA, tenant=tenant)),
        "metric_history": text(HISTORY.format(schema=SCHEMA, tenant=tenant, score_tenant=score_tenant)),
        "metric_history_join_first": text(
            HISTORY_JOIN_FIRST.format(schema=SCHEMA, tenant=tenant, score_tenant=score_tenant)
        ),
    }


def tsv(values) -> str:
    return "\t".join("\\N" if value is None else str(value) for value in values) + "\n"


def load(admin_url: str, tenants: list[str], rows: int, commits: int) -> dict:
    """COPY the tenants' scores and reports as the superuser; the counts and seconds taken."""
    per_commit = max(len(METRICS), rows // len(tenants) // commits)
    items = per_commit // len(METRICS)
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    engine = create_engine(admin_url, poolclass=pool.NullPool)
    started, loaded = time.perf_counter(), {"metric_scores": 0, "regression_reports": 0}
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for number, tenant in enumerate(tenants):
            scores, reports = io.StringIO(), io.StringIO()
            for commit_no in range(commits):
                commit, run_id = f"{number:03d}{commit_no:05d}" + "ab" * 16, f"run-{tenant}-{commit_no}"
                created = start + timedelta(hours=commit_no, seconds=number)
                row_no = 0
                for item in range(items):
                    for metric in METRICS:
                        measured = rng.random() > 0.05
                        scores.write(
                            tsv(
                                (
                                    tenant,
                                    VERSION,
                                    commit,
                                    run_id,
                                    row_no,
                                    f"q{item:04d}",
                                    metric,
                                    round(rng.random(), 4) if measured else None,
                                    "ok" if measured else "unmeasured",
                                    "" if measured else "no statement",
                                    "{}",
                                    "offline-support-v2",
                                    5,
                                    created.isoformat(),
                                )
                            )
                        )
                        row_no += 1
                verdict = "pass" if rng.random() > 0.2 else "block"
                summary = json.dumps({"verdict": verdict, "metrics": {m: round(rng.random(), 3) for m in METRICS}})
                reports.write(
                    tsv(
                        (
                            tenant,
                            VERSION,
                            commit,
                            run_id,
                            verdict,
                            summary.replace("\\", "\\\\"),
                            f"# Report {commit}\\n" + "row " * 200,
                            "<html>" + "<p>cell</p>" * 400 + "</html>",
                            created.isoformat(),
                        )
                    )
                )
                loaded["metric_scores"] += row_no
                loaded["regression_reports"] += 1
            for table, columns, buffer in (
                ("metric_scores", SCORE_COLUMNS, scores),
                ("regression_reports", REPORT_COLUMNS, reports),
            ):
                buffer.seek(0)
                cursor.copy_expert(f"copy {SCHEMA}.{table} ({', '.join(columns)}) from stdin", buffer)
            raw.commit()
        raw.set_session(autocommit=True)
        cursor.execute(f"vacuum analyze {SCHEMA}.metric_scores")
        cursor.execute(f"vacuum analyze {SCHEMA}.regression_reports")
    finally:
        raw.close()
        engine.dispose()
    return {**loaded, "per_commit_rows": per_commit, "load_s": round(time.perf_counter() - started, 1)}


def summary(samples_ms: list[float]) -> dict:
    ordered = sorted(samples_ms)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(statistics.quantiles(ordered, n=100)[94], 3),
        "min_ms": round(ordered[0], 3),
        "max_ms": round(ordered[-1], 3),
        "runs": len(ordered),
    }


def plans(database, tenant: str) -> dict:
    """The RLS side's plans: the policy must reach an index, not a scan of every tenant's rows."""
    shown = {}
    with database.tenant(tenant) as connection:
        for name, query in queries(explicit_tenant=False).items():
            lines = connection.execute(text(f"explain {query.text}"), {"version": VERSION}).scalars().all()
            shown[name] = [line.strip() for line in lines if "Scan" in line or "Index Cond" in line]
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="metric_scores rows in all")
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--commits", type=int, default=100, help="audited commits (regression reports) per tenant")
    parser.add_argument("--reps", type=int, default=200, help="timed runs of each query on each side")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    server = parse_url(SERVER_URL, "RAG_EVAL_BENCH_SERVER_URL")
    name = f"rag_eval_bench_{os.getpid()}"
    admin = create_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'create database "{name}"'))
    admin_url = server.set(database=name)
    try:
        upgrade(admin_url.render_as_string(hide_password=False))
        tenants = [f"tenant-{number:03d}" for number in range(args.tenants)]
        loaded = load(admin_url.render_as_string(hide_password=False), tenants, args.rows, args.commits)
        app = open_results_database(
            admin_url.set(username=APP_ROLE, password=None).render_as_string(hide_password=False)
        )
        peer = build_engine(admin_url)  # the superuser bypasses RLS: the same pool settings, the tenant in the WHERE
        rls_queries, peer_queries = queries(explicit_tenant=False), queries(explicit_tenant=True)
        timings = {side: {query: [] for query in rls_queries} for side in ("rls", "no_rls")}
        rng = random.Random(11)
        warmup = 10
        for rep in range(warmup + args.reps):
            tenant = rng.choice(tenants)
            for query in rls_queries:
                results = {}
                for side in ("rls", "no_rls") if rep % 2 else ("no_rls", "rls"):
                    started = time.perf_counter()
                    if side == "rls":
                        with app.tenant(tenant) as connection:
                            rows = connection.execute(rls_queries[query], {"version": VERSION}).all()
                    else:
                        with peer.begin() as connection:
                            rows = connection.execute(peer_queries[query], {"version": VERSION, "tenant": tenant}).all()
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    results[side] = rows
                    if rep >= warmup:
                        timings[side][query].append(elapsed_ms)
                if results["rls"] != results["no_rls"] or not results["rls"]:
                    raise SystemExit(
                        f"{query} for {tenant}: RLS returned {len(results['rls'])} rows, "
                        f"the explicit filter {len(results['no_rls'])}"
                    )
        shown_plans = plans(app, tenants[0])
        with peer.connect() as connection:
            server_version = connection.execute(text("show server_version")).scalar()
            shared_buffers = connection.execute(text("show shared_buffers")).scalar()
        app.dispose()
        peer.dispose()
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'drop database if exists "{name}" with (force)'))
        admin.dispose()

    figures = {
        "command": "python benchmarks/rls_scores.py " + " ".join(sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "postgres": server_version,
            "shared_buffers": shared_buffers,
            "load_average_1m": {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)},
            "note": "other jobs share the machine; both sides alternate, so their load hits both alike",
        },
        "data": {"tenants": args.tenants, "commits_per_tenant": args.commits, **loaded},
        "queries": {
            "latest_reports": "a tenant's latest 50 regression reports (commit, run, verdict, summary, created_at)",
            "metric_history": "mean score per commit and metric over the tenant's latest 100 commits "
            "(each commit aggregated in a LATERAL subquery)",
            "metric_history_join_first": "the same result, joining all the commits' scores before grouping",
        },
        "timed": "one whole transaction per run: pool checkout (with its ping), BEGIN, [set tenant,] query, COMMIT",
        "target_p95_ms": TARGET_P95_MS,
        "results": {},
        "rls_plans": shown_plans,
    }
    for query in timings["rls"]:
        rls, no_rls = summary(timings["rls"][query]), summary(timings["no_rls"][query])
        figures["results"][query] = {
            "rls": rls,
            "no_rls": no_rls,
            "ratio_rls_to_no_rls": {
                "median": round(rls["median_ms"] / no_rls["median_ms"], 2),
                "p95": round(rls["p95_ms"] / no_rls["p95_ms"], 2),
            },
            "rls_p95_within_target": rls["p95_ms"] < TARGET_P95_MS,
        }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rls_scores.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
