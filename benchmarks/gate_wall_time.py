"""Wall time of `rag-eval gate` on the demo tenant, as a CI job runs it: a fresh process per call.

    .venv/bin/python benchmarks/gate_wall_time.py [--runs 5]

Synthesizes the demo tenant's golden set once (`rag-eval demo`, as the UI test prepares its instance)
in a temporary DAGSTER_HOME and warehouse, then times the gate for the reference candidate (passes) and for a degraded one (blocked).
The peer, measured in the same run, is the bare start of the same CLI (`rag-eval --help`): the part
of a gate's time that is Python and imports, not auditing. Writes benchmarks/results/gate_wall_time.json.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from rag_eval_pipeline_tests.dagster_ui import prepare_instance  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
DEGRADED = "rag_eval_pipeline_tests.candidates:no_retrieval"  # retrieves nothing: every retrieval metric drops


def timed(env: dict, *args: str, expect: int) -> float:
    started = time.perf_counter()
    completed = subprocess.run([RAG_EVAL, *args], env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if completed.returncode != expect:
        raise SystemExit(
            f"rag-eval {' '.join(args)} exited {completed.returncode}, expected {expect}:\n{completed.stderr}"
        )
    return round(elapsed, 2)


def summary(samples: list[float]) -> dict:
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples), "runs_s": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        env = prepare_instance(Path(scratch))  # golden set + the first candidate as the baseline
        setup = round(time.perf_counter() - started, 2)
        env["PYTHONPATH"] = str(REPO_ROOT)  # the degraded candidate lives in the test package
        passing, blocked, peer = [], [], []
        for run in range(args.runs):  # interleaved, so machine load hits all three alike
            passing.append(timed(env, "gate", "--tenant", "demo", "--candidate", f"pass-{run}", expect=0))
            blocked.append(
                timed(env, "gate", "--tenant", "demo", "--candidate", f"bad-{run}", "--entry", DEGRADED, expect=1)
            )
            peer.append(timed(env, "--help", expect=0))
    figures = {
        "tenant": "demo (data/tenants/demo), offline judge",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "demo_setup_s": setup,
        "gate_pass": summary(passing),
        "gate_blocked": summary(blocked),
        "peer_cli_start": summary(peer),
        "ratio_to_peer": {
            "pass": round(statistics.median(passing) / statistics.median(peer), 1),
            "blocked": round(statistics.median(blocked) / statistics.median(peer), 1),
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gate_wall_time.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
