"""Two tenants' full lineage in production mode: wall time on 2 Celery workers against the in-process executor.

    .venv/bin/python benchmarks/celery_lineage.py [--repetitions 3]

Brings up production mode exactly as rag_eval_pipeline_tests/test_celery/test_celery_lineage.py does: a
scratch results database at the migration head, a local S3-compatible server, Redis for the caches, and
`celery_cluster` (2 workers, each serving rag-eval-large and rag-eval-small, and the Dagster daemon).
Tenants acme (large tier) and globex (small tier) get the test's documents (`_lay_out`).

The two sides, measured in the same run, alternating which goes first, after one untimed warm-up each:
- in-process: one shell runs `rag-eval run --tenant acme ...` then the same for globex, with DAGSTER_HOME
  an empty folder (rag-eval copies the repo's dagster.yaml there: SQLite, the default run launcher);
- workers: both tenants' `rag-eval run ...` start at once against the cluster's instance (DAGSTER_HOME with
  the Celery dagster.yaml): each submits its run to the queue and waits; timed until both exit.
Both sides write to the same Postgres and object store, so every measurement gets dataset versions of its
own (registered first with `rag-eval register`, untimed). Worker and daemon start-up are long-lived
services, outside the timing, and reported separately. Writes benchmarks/results/celery_lineage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from rag_eval_pipeline.automation.queues import QUEUES  # noqa: E402
from rag_eval_pipeline.stores.database.upgrade import upgrade  # noqa: E402
from rag_eval_pipeline_tests.support.celery_workers import celery_cluster  # noqa: E402
from rag_eval_pipeline_tests.support.object_store import start_seaweed_s3  # noqa: E402
from rag_eval_pipeline_tests.support.postgres import APP_ROLE, database_url, scratch_database  # noqa: E402
from rag_eval_pipeline_tests.test_production.conftest import production_variables  # noqa: E402
from rag_eval_pipeline_tests.test_production.test_production_lineage import TENANTS, _lay_out  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
BIN = Path(sys.executable).parent
WORKERS = {"worker-a": (QUEUES["large"], QUEUES["small"]), "worker-b": (QUEUES["large"], QUEUES["small"])}
CODE = {"rag_eval_pipeline": "rag_eval_pipeline.definitions"}
QUEUED = "queued for a worker on rag-eval-"
FINISHED = re.compile(r"run \S+ \(full_pipeline\) finished in ([0-9.]+) s")
TIMEOUT_S = 600


def _fail(what: str, completed_rc: int, out: str, err: str) -> None:
    raise SystemExit(
        f"{what} exited {completed_rc}, expected 0\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-5000:]}"
    )


def run_command(tenant: str, version: str) -> list[str]:
    return ["rag-eval", "run", "--tenant", tenant, "--version", version, "--job", "full_pipeline", "--commit", "good"]


def register(env: dict, version: str) -> None:
    for tenant in TENANTS:
        done = subprocess.run(
            ["rag-eval", "register", "--tenant", tenant, "--version", version],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        if done.returncode:
            _fail(f"rag-eval register --tenant {tenant} --version {version}", done.returncode, done.stdout, done.stderr)


def reported(out: str) -> float:
    """The run's own time as `rag-eval run` reports it (submit-and-wait, or execute in process)."""
    found = FINISHED.search(out)
    return float(found.group(1)) if found else float("nan")


def in_process(env: dict, version: str) -> dict:
    """Both tenants one after the other in one shell, as one machine does; wall time of both."""
    script = "set -e\n" + "\n".join(shlex.join(run_command(tenant, version)) for tenant in TENANTS)
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.perf_counter() - started
    if done.returncode:
        _fail(f"in-process runs of {version}", done.returncode, done.stdout, done.stderr)
    if QUEUED in done.stderr:
        raise SystemExit(f"the in-process side handed a run to the workers:\n{done.stderr[-3000:]}")
    runs = [float(x) for x in FINISHED.findall(done.stdout)]
    if len(runs) != len(TENANTS):
        raise SystemExit(f"expected {len(TENANTS)} finished runs, got:\n{done.stdout[-3000:]}")
    return {"wall_s": round(wall, 2), "reported_run_s": dict(zip(TENANTS, runs))}


def on_workers(env: dict, version: str) -> dict:
    """Both tenants' runs started at once against the cluster; wall time until both exit."""
    started = time.perf_counter()
    processes = {
        tenant: subprocess.Popen(
            run_command(tenant, version), env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for tenant in TENANTS
    }
    outputs = {tenant: process.communicate(timeout=TIMEOUT_S) for tenant, process in processes.items()}
    wall = time.perf_counter() - started
    for tenant, process in processes.items():
        out, err = outputs[tenant]
        if process.returncode:
            _fail(f"{tenant}'s run of {version} on the workers", process.returncode, out, err)
        if QUEUED not in err:
            raise SystemExit(f"{tenant}'s run of {version} did not go to the workers:\n{err[-3000:]}")
    return {"wall_s": round(wall, 2), "reported_run_s": {t: reported(outputs[t][0]) for t in TENANTS}}


def summary(samples: list[float]) -> dict:
    return {
        "median_s": round(statistics.median(samples), 2),
        "min_s": min(samples),
        "max_s": max(samples),
        "runs_s": samples,
    }


def note(cpus: int | None, instance_config: dict) -> str:
    dequeue = instance_config["run_coordinator"]["config"]["dequeue_interval_seconds"]
    return (
        f"On {cpus} cores the two workers' runs compete for the same CPUs (and with the daemon, Postgres, Redis and "
        "the S3 server), so running the tenants side by side cannot halve the wall time. The worker side also pays "
        "per run what the in-process side does not: the CLI loads the code location and builds the plan to submit "
        f"the run, the daemon dequeues it (every {dequeue} s here, as in the Celery tests; deploy/celery/dagster.yaml "
        "says 5 s), Celery hands it to a worker whose run process loads the code again, and the CLI polls the run's "
        "status every 1 s. Caches (embeddings, judge) are in Redis and shared by both sides; each side's untimed "
        "warm-up fills them. Worker and daemon start-up is outside the timing (setup_untimed_s)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repetitions", type=int, default=3, help="timed repetitions per side (after one warm-up each)"
    )
    args = parser.parse_args()
    began = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    setup: dict[str, float] = {}
    tag = uuid.uuid4().hex[:6]
    with (
        tempfile.TemporaryDirectory(prefix="celery-lineage-") as scratch_name,
        scratch_database("rag_eval_bench") as db,
    ):
        scratch = Path(scratch_name)
        documents_root = scratch / "documents"
        _lay_out(documents_root)
        started = time.perf_counter()
        upgrade(database_url(db))
        setup["results_database_upgrade_s"] = round(time.perf_counter() - started, 2)
        server = start_seaweed_s3()
        setup["object_store_start_s"] = round(server.startup_s, 2)
        try:
            production = {
                "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
                "RAG_EVAL_CANDIDATE_MODULES": "rag_eval_pipeline_tests",
                "RAG_EVAL_LARGE_TENANTS": "acme",  # as the test: acme on the large queue, globex on the small one
                **production_variables(database_url(db, user=APP_ROLE), server, f"bench-{tag}"),
                "RAG_EVAL_WAREHOUSE": str(scratch / "no-local-warehouse"),  # production mode writes nothing here
                "PYTHONPATH": str(REPO_ROOT),
            }
            started = time.perf_counter()
            with celery_cluster(scratch / "cluster", WORKERS, extra_env=production, code_locations=CODE) as cluster:
                setup["workers_and_daemon_start_s"] = round(time.perf_counter() - started, 2)
                path = f"{BIN}{os.pathsep}{cluster.env['PATH']}"
                sides = {
                    "in_process": (
                        {**cluster.env, "DAGSTER_HOME": str(scratch / "local_home"), "PATH": path},
                        in_process,
                    ),
                    "workers": ({**cluster.env, "DAGSTER_HOME": str(cluster.home("ci")), "PATH": path}, on_workers),
                }
                samples: dict[str, list[dict]] = {side: [] for side in sides}
                warmup: dict[str, dict] = {}
                for repetition in range(args.repetitions + 1):  # 0: the untimed warm-up of each side
                    order = list(sides) if repetition % 2 == 0 else list(reversed(sides))
                    for side in order:
                        env, measure = sides[side]
                        version = f"{'ip' if side == 'in_process' else 'cw'}{repetition}-{tag}"
                        register(env, version)
                        result = {"version": version, "first": order[0] == side, **measure(env, version)}
                        print(
                            f"{'warm-up' if repetition == 0 else f'repetition {repetition}'} {side}: "
                            f"{result['wall_s']} s {result['reported_run_s']}",
                            flush=True,
                        )
                        if repetition == 0:
                            warmup[side] = result
                        else:
                            samples[side].append(result)
                took = {
                    name: len(re.findall(r"Task .*execute_job.* succeeded", worker.log_text()))
                    for name, worker in cluster.workers.items()
                }
        finally:
            server.close()
    load_after = [round(x, 2) for x in os.getloadavg()]
    walls = {side: [r["wall_s"] for r in results] for side, results in samples.items()}
    medians = {side: round(statistics.median(values), 2) for side, values in walls.items()}
    figures = {
        "command": f".venv/bin/python benchmarks/celery_lineage.py --repetitions {args.repetitions}",
        "what": "full_pipeline of tenants acme and globex (test documents), production mode (Postgres, S3, Redis), "
        "commit 'good'; in-process: both runs in sequence in one shell; workers: both submitted at once "
        "to 2 Celery workers (each serving rag-eval-large,rag-eval-small), timed until both CLIs exit",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
        "setup_untimed_s": setup,
        "daemon_intervals_s": {
            "dequeue": cluster.instance_config["run_coordinator"]["config"]["dequeue_interval_seconds"],
            "run_monitoring_poll": cluster.instance_config["run_monitoring"]["poll_interval_seconds"],
        },
        "warmup": warmup,
        "in_process": {**summary(walls["in_process"]), "repetitions": samples["in_process"]},
        "workers": {**summary(walls["workers"]), "repetitions": samples["workers"]},
        "ratio_workers_to_in_process": round(medians["workers"] / medians["in_process"], 2),
        "runs_taken_per_worker": took,
        "total_script_s": round(time.perf_counter() - began, 1),
        "note": note(os.cpu_count(), cluster.instance_config),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "celery_lineage.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
