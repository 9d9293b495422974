"""What tracing costs an audit: `rag-eval gate` on the demo tenant with tracing on against off, interleaved.

    .venv/bin/python benchmarks/tracing_overhead.py [--runs 7]

The demo tenant's golden set and first baseline are made once (`rag-eval demo`, in a temporary DAGSTER_HOME
and warehouse); then each run gates the reference candidate twice in turn, once with no OTEL_* variable (the
peer) and once with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP receiver on loopback in this
process (rag_eval_pipeline_tests/support/otlp_receiver.py: it decodes every request, as a collector would),
so that the spans are made, batched, exported and flushed before the command ends. Whole commands are timed;
medians and the ratio on/off are reported, with the spans received per traced gate.
Writes benchmarks/results/tracing_overhead.json. The issue's target: under 5% of the audit's time.
"""

from __future__ import annotations

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

from rag_eval_pipeline_tests.support.otlp_receiver import OtlpReceiver  # noqa: E402

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
RESULTS = REPO_ROOT / "benchmarks" / "results" / "tracing_overhead.json"


def _timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, OtlpReceiver() as receiver:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        base.update(
            DAGSTER_HOME=str(Path(scratch) / "home"),
            RAG_EVAL_WAREHOUSE=str(Path(scratch) / "warehouse"),
            RAG_EVAL_DOCUMENTS_ROOT=str(REPO_ROOT / "data" / "tenants"),
        )
        Path(base["DAGSTER_HOME"]).mkdir()
        (Path(base["DAGSTER_HOME"]) / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
        _timed([RAG_EVAL, "demo"], base)
        traced = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        off, on, spans = [], [], []
        for run in range(args.runs):
            off.append(_timed([RAG_EVAL, "gate", "--tenant", "demo", "--candidate", f"off-{run}"], base))
            before = len(receiver.spans)
            on.append(_timed([RAG_EVAL, "gate", "--tenant", "demo", "--candidate", f"on-{run}"], traced))
            spans.append(len(receiver.spans) - before)
    results = {
        "what": "rag-eval gate on the demo tenant (reference candidate, offline judge), tracing on against off",
        "command": ".venv/bin/python benchmarks/tracing_overhead.py --runs " + str(args.runs),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "runs": args.runs,
        "off_s": {"median": round(statistics.median(off), 3), "runs": [round(t, 3) for t in off]},
        "on_s": {"median": round(statistics.median(on), 3), "runs": [round(t, 3) for t in on]},
        "ratio_on_to_off": round(statistics.median(on) / statistics.median(off), 3),
        "spans_per_traced_gate": {"median": statistics.median(spans), "runs": spans},
        "target": "under 5% (ratio under 1.05)",
    }
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
