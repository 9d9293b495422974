"""`make demo` on a fresh clone, the install included: this commit against an earlier one, in turn.

    .venv/bin/python benchmarks/demo_first_run.py [--against d3fcc95] [--runs 2]

Each run clones the repository at the commit into a temporary folder (`git clone --no-local`, then a
checkout of the commit: what a user's clone holds) and times `make demo` there with an environment of a
fresh machine: no virtual environment, no pip cache (PIP_NO_CACHE_DIR), an empty user cache
(XDG_CACHE_HOME: the ONNX graph is built again), no DAGSTER_HOME or RAG_EVAL_* variables. Packages come from
whatever indexes pip is configured with here (local wheel folders and PyPI mirrors on this machine), the
same for both commits. The two commits alternate, so machine load hits both alike. Records the wall time,
the virtual environment's size and whether the demo ended with its report.
Writes benchmarks/results/demo_first_run.json.
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

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"


def clone(commit: str, into: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO_ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", commit], check=True)


def fresh_environment(scratch: Path) -> dict:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_", "VIRTUAL_ENV"))}
    return {**kept, "PIP_NO_CACHE_DIR": "1", "XDG_CACHE_HOME": str(scratch / "cache")}


def one_run(commit: str, scratch: Path) -> dict:
    checkout = scratch / "clone"
    clone(commit, checkout)
    started = time.perf_counter()
    done = subprocess.run(
        ["make", "demo"], cwd=checkout, env=fresh_environment(scratch), capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - started
    venv = checkout / ".venv"
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    return {
        "wall_s": round(wall, 1),
        "exit": done.returncode,
        "demo_finished": "Open the lineage in the Dagster UI" in done.stdout,
        "venv_mib": round(size / 2**20),
        "torch_installed": any(venv.glob("lib/python*/site-packages/torch")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="d3fcc95")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    commits = {
        name: subprocess.check_output(["git", "-C", str(REPO_ROOT), "rev-parse", ref], text=True).strip()
        for name, ref in (("this", "HEAD"), ("earlier", args.against))
    }
    runs: dict[str, list[dict]] = {name: [] for name in commits}
    for run in range(args.runs):
        for name in commits if run % 2 == 0 else reversed(list(commits)):
            scratch = Path(tempfile.mkdtemp(prefix="rag-eval-first-run-"))
            try:
                runs[name].append(one_run(commits[name], scratch))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            print(name, runs[name][-1], flush=True)
    results = {
        "what": "make demo on a fresh clone: venv, install (no pip cache), the whole demo lineage",
        "commits": commits,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        **{
            name: {"median_wall_s": statistics.median(r["wall_s"] for r in each), "runs": each}
            for name, each in runs.items()
        },
    }
    results["ratio_this_to_earlier"] = round(results["this"]["median_wall_s"] / results["earlier"]["median_wall_s"], 3)
    results["command"] = " ".join([".venv/bin/python benchmarks/demo_first_run.py", *sys.argv[1:]])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "demo_first_run.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
