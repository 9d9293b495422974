"""What the gate service costs a CI job: a gate through `rag-eval serve` against the CLI gate, same run.

    .venv/bin/python benchmarks/service_gate.py [--runs 5] [--tenants 10]

Setup (not timed): the demo tenant's lineage (`rag-eval demo`) in a temporary DAGSTER_HOME and
warehouse, its published golden set copied to tenants t01..tNN (each registered, the reference gated
once as its baseline), a local signing key, and the service started on it. Then, interleaved so that
machine load hits both sides alike:

- `gate`: `rag-eval gate` of the reference candidate on demo, as the operator's CLI (the peer: it opens
  the stores itself) and as a CI job through the service (only RAG_EVAL_SERVER and a token); and the
  same with `--outputs` of answers that decline every question (blocked, exit 1 on both sides).
- `token`: one HS256 verification in process (the service's TokenVerifier), and an authenticated
  request (GET baselines) against an unauthenticated one (GET /openapi.json) over HTTP.
- `tenants`: N tenants' gates started at once, each a process with its own tenant's token, through
  the service; the peer is the same N gates as N operator CLI processes at once.

Target (issue 21): a gate through the service within 0.5 s of the CLI gate. Writes
benchmarks/results/service_gate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from rag_eval_pipeline.service.tokens import TokenVerifier  # noqa: E402
from rag_eval_pipeline_tests.dagster_ui import prepare_instance  # noqa: E402
from rag_eval_pipeline_tests.support.gate_service import POLICY, gate_service, token_for, write_key  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
TARGET_OVERHEAD_S = 0.5


def run(env: dict, *args: str, expect: int) -> float:
    started = time.perf_counter()
    completed = subprocess.run([RAG_EVAL, *args], env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if completed.returncode != expect:
        raise SystemExit(
            f"rag-eval {' '.join(args)} exited {completed.returncode}, expected {expect}:\n{completed.stderr}"
        )
    return round(elapsed, 3)


def at_once(commands: list[tuple[dict, list[str]]], expect: int) -> float:
    started = time.perf_counter()
    processes = [
        subprocess.Popen([RAG_EVAL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for env, args in commands
    ]
    for process in processes:
        _, err = process.communicate(timeout=1800)
        if process.returncode != expect:
            raise SystemExit(f"{process.args} exited {process.returncode}, expected {expect}:\n{err}")
    return round(time.perf_counter() - started, 2)


def summary(samples: list[float]) -> dict:
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples), "runs_s": samples}


def add_tenants(env: dict, count: int) -> list[str]:
    """Tenants t01..tNN with the demo's published golden set, registered, the reference as their baseline."""
    warehouse = Path(env["RAG_EVAL_WAREHOUSE"])
    demo = warehouse / "demo" / "v1"
    tenants = [f"t{n:02d}" for n in range(1, count + 1)]
    for tenant in tenants:
        target = warehouse / tenant / "v1"
        target.mkdir(parents=True)
        for table in demo.iterdir():
            if table.is_file() and not table.name.startswith("."):
                shutil.copy(table, target / table.name)
        manifest = json.loads((target / "golden_set.manifest.json").read_text())
        (target / "golden_set.manifest.json").write_text(json.dumps({**manifest, "tenant": tenant}, indent=2))
        run(env, "register", "--tenant", tenant, "--version", "v1", expect=0)
        run(env, "gate", "--tenant", tenant, "--candidate", "base", "--branch", "main", expect=0)
    return tenants


def declining_outputs(env: dict, path: Path) -> Path:
    run(env, "questions", "--tenant", "demo", "--out", str(path.with_suffix(".questions.jsonl")), expect=0)
    records = [json.loads(line) for line in path.with_suffix(".questions.jsonl").read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "answer": "I don't know.", "contexts": []}) + "\n" for r in records))
    return path


def token_figures(url: str, key_file: Path, requests: int = 200) -> dict:
    token = token_for(key_file, "demo")
    verifier = TokenVerifier(POLICY, key=key_file.read_bytes().strip())
    verify_us = []
    for _ in range(2000):
        started = time.perf_counter()
        verifier.verify(token)
        verify_us.append((time.perf_counter() - started) * 1e6)
    authed, open_ = [], []
    with httpx.Client(base_url=url) as client:
        for _ in range(requests):  # interleaved
            started = time.perf_counter()
            assert client.get("/v1/tenants/demo/baselines", headers={"Authorization": f"Bearer {token}"}).is_success
            authed.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            assert client.get("/openapi.json").is_success
            open_.append((time.perf_counter() - started) * 1000)
    return {
        "hs256_verify_median_us": round(statistics.median(verify_us), 1),
        "authenticated_request_median_ms": round(statistics.median(authed), 2),
        "peer_unauthenticated_request_median_ms": round(statistics.median(open_), 2),
        "requests": requests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--batch-runs", type=int, default=2, help="times the N-tenant batches are run, each side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        operator = prepare_instance(root)
        operator["RAG_EVAL_TOKEN_KEY_FILE"] = str(write_key(root / "token.key"))
        operator["RAG_EVAL_SERVICE_MAX_GATES"] = str(args.tenants)  # the batch is not queued by the service
        tenants = add_tenants(operator, args.tenants)
        outputs = declining_outputs(operator, root / "declining.jsonl")
        setup_s = round(time.perf_counter() - started, 1)
        key = Path(operator["RAG_EVAL_TOKEN_KEY_FILE"])
        ci = {k: v for k, v in operator.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))}
        with gate_service(operator, root / "service.log") as url:
            ci_for = lambda tenant: {**ci, "RAG_EVAL_SERVER": url, "RAG_EVAL_TOKEN": token_for(key, tenant)}
            cli, served, cli_out, served_out = [], [], [], []
            for n in range(args.runs):
                cli.append(run(operator, "gate", "--tenant", "demo", "--candidate", f"cli-{n}", expect=0))
                served.append(run(ci_for("demo"), "gate", "--tenant", "demo", "--candidate", f"svc-{n}", expect=0))
                gate_out = ("gate", "--tenant", "demo", "--outputs", str(outputs), "--candidate")
                cli_out.append(run(operator, *gate_out, f"cli-out-{n}", expect=1))
                served_out.append(run(ci_for("demo"), *gate_out, f"svc-out-{n}", expect=1))
            tokens = token_figures(url, key)
            batch_cli, batch_served = [], []
            for n in range(args.batch_runs):
                batch_cli.append(
                    at_once([(operator, ["gate", "--tenant", t, "--candidate", f"bc-{n}"]) for t in tenants], 0)
                )
                batch_served.append(
                    at_once([(ci_for(t), ["gate", "--tenant", t, "--candidate", f"bs-{n}"]) for t in tenants], 0)
                )
    overhead = statistics.median(served) - statistics.median(cli)
    overhead_out = statistics.median(served_out) - statistics.median(cli_out)
    figures = {
        "command": f".venv/bin/python benchmarks/service_gate.py --runs {args.runs} --tenants {args.tenants}",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "setup_s": setup_s,
        "gate_reference": {"cli": summary(cli), "service": summary(served), "overhead_s": round(overhead, 3)},
        "gate_outputs_blocked": {
            "cli": summary(cli_out),
            "service": summary(served_out),
            "overhead_s": round(overhead_out, 3),
        },
        "target_overhead_s": TARGET_OVERHEAD_S,
        "target_met": max(overhead, overhead_out) <= TARGET_OVERHEAD_S,
        "token": tokens,
        "concurrent_tenants": {
            "tenants": args.tenants,
            "service_max_gates": args.tenants,
            "cli_at_once": summary(batch_cli),
            "service_at_once": summary(batch_served),
            "ratio_service_to_cli": round(statistics.median(batch_served) / statistics.median(batch_cli), 2),
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "service_gate.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
