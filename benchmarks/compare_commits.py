"""Whole commands timed on this checkout and on an earlier commit, interleaved in one run.

    .venv/bin/python benchmarks/compare_commits.py --against ff61110 [--runs 5] [--suite | --suite-only]

The earlier commit is checked out with `git worktree` beside the repository (so its tests find
`../shared` too) and run with the same virtual environment, its own code first on PYTHONPATH (commits
before the switch to scikit-learn's HDBSCAN also need `pip install hdbscan` in that environment). Each
measurement runs both trees in turn, `--runs` times, so machine load hits both alike; medians and the
ratio this/earlier are reported. Measurements:

- `help`: `rag-eval --help` in a fresh process; peer `python -c "import pandas"` in the same run.
- `gate`: `rag-eval gate` of the reference candidate on the demo tenant (its golden set made once per
  tree with `rag-eval demo`, in a temporary DAGSTER_HOME and warehouse).
- `lineage`: this checkout's `benchmarks/lineage_run.py` (demo corpus) over each tree's code, and
  `offline_throughput` and `synthesis_cold`: each tree's own `benchmarks/offline_throughput.py` and
  `benchmarks/synthesis_throughput.py --skip-llm` (their imports follow their tree's layout), timed as whole
  commands, with the triplets per second and the verified pairs per hour (cold) each wrote to its tree's
  results file after each run. The lineage harness runs with --print-only; the other two rewrite their
  tree's results files (check them out again if you keep only compare_commits.json).
- `--suite`: the whole test suite (`python -m pytest -q`), once per tree (about 40 minutes in all on 2
  cores), and the plain-Python tier (this tree's Makefile `FAST_TIER`, what `make test-fast` runs) of
  each tree, `--runs` times in turn (a marker an earlier tree does not register is left out of its
  expression). `--suite-only` measures only these two, and writes benchmarks/results/suite_time.json
  instead; `--fast-tier-only` measures the fast tier alone and keeps that file's whole-suite figures.

Writes benchmarks/results/compare_commits.json.
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

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"
# The plain-Python tier, one definition: the Makefile's (what `make test-fast` runs).
FAST_TIER = next(
    line.split(":=", 1)[1].strip()
    for line in (REPO_ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    if line.startswith("FAST_TIER")
)


MEASUREMENTS = ("help", "gate", "gate_blocked", "lineage_demo", "offline_throughput", "synthesis_cold")
DEGRADED_CANDIDATE = (
    "rag_eval_pipeline_tests.candidates:no_retrieval"  # retrieves nothing: every retrieval metric drops
)


def fast_tier_of(root: Path) -> str:
    """FAST_TIER without the `not <marker>` clauses for markers the tree at root does not register
    (pytest refuses an unknown marker in -m under --strict-markers)."""
    registered = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    known = {line.split(":", 1)[0].strip() for line in registered.get("markers", [])}
    clauses = [clause.strip() for clause in FAST_TIER.split(" and ")]
    return " and ".join(clause for clause in clauses if clause.removeprefix("not ").strip() in known)


def rag_eval(*args: str) -> list[str]:
    """`rag-eval` of whichever tree is first on PYTHONPATH (the console script would pin this checkout)."""
    return [sys.executable, "-c", "import sys; from rag_eval_pipeline.cli import main; sys.exit(main())", *args]


class Tree:
    def __init__(self, name: str, root: Path, scratch: Path):
        self.name, self.root = name, root
        home, warehouse = scratch / name / "home", scratch / name / "warehouse"
        home.mkdir(parents=True)
        self.bare_env = {**os.environ, "PYTHONPATH": str(root)}  # the tests set their own locations
        self.env = {
            **self.bare_env,
            "DAGSTER_HOME": str(home),
            "RAG_EVAL_WAREHOUSE": str(warehouse),
            "RAG_EVAL_DOCUMENTS_ROOT": str(root / "data" / "tenants"),
        }

    def timed(self, command: list[str], expect: int | None = 0, timeout: int = 3600, bare: bool = False) -> float:
        """Wall seconds of command; a wrong exit status stops the benchmark (expect None: any status)."""
        started = time.perf_counter()
        env = self.bare_env if bare else self.env
        done = subprocess.run(command, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)
        elapsed = time.perf_counter() - started
        self.last_tail = (done.stdout + done.stderr)[-300:]
        self.last_failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        if expect is not None and done.returncode != expect:
            tail = (done.stdout + done.stderr)[-2000:]
            raise SystemExit(f"[{self.name}] {' '.join(command)} exited {done.returncode}, expected {expect}:\n{tail}")
        return round(elapsed, 2)


def add_worktree(revision: str) -> Path:
    sha = subprocess.check_output(["git", "rev-parse", "--short", revision], cwd=REPO_ROOT, text=True).strip()
    path = REPO_ROOT.parent / f".rag-eval-bench-{sha}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), sha], cwd=REPO_ROOT, check=True, capture_output=True
        )
    return path


def paired(trees: list[Tree], command, runs: int, expect: int | None = 0, bare: bool = False, read=None) -> dict:
    """Each tree's command `runs` times in turn. read(tree) -> dict, called after each run: figures the
    command wrote (its results file), kept per run and as medians."""
    samples = {tree.name: [] for tree in trees}
    figures: dict[str, list[dict]] = {tree.name: [] for tree in trees}
    for run in range(runs):
        for tree in trees if run % 2 == 0 else reversed(trees):  # alternate the order: no tree always goes first
            samples[tree.name].append(tree.timed(command(tree, run), expect, bare=bare))
            if read is not None:
                figures[tree.name].append(read(tree))
    results = {name: {"median_s": statistics.median(s), "runs_s": s} for name, s in samples.items()}
    for name, each in figures.items():
        if each:
            results[name]["figures"] = each
            results[name]["median_figures"] = {key: statistics.median(f[key] for f in each) for key in each[0]}
    return results


def results_of(filename: str, *path: str):
    """read() for paired: the numbers at `path` in the tree's benchmarks/results/<filename>."""

    def read(tree: Tree) -> dict:
        data = json.loads((tree.root / "benchmarks" / "results" / filename).read_text(encoding="utf-8"))
        found = {}
        for key in path:
            value = data
            for part in key.split("."):
                value = value.get(part, {}) if isinstance(value, dict) else {}
            if isinstance(value, int | float):
                found[key] = value
        return found

    return read


def this_against_earlier(trees: list[Tree], command, runs: int, **options) -> dict:
    """paired() of this tree and the earlier one, with the ratio of their medians."""
    return with_ratio(paired(trees, command, runs, **options), "this", "earlier")


def with_ratio(figures: dict, this: str, earlier: str) -> dict:
    figures["ratio_this_to_earlier"] = round(figures[this]["median_s"] / figures[earlier]["median_s"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the earlier commit, e.g. the last one before a change")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--suite", action="store_true", help="also time the whole test suite once per tree")
    parser.add_argument("--suite-only", action="store_true", help="time only the test suite and its fast tier")
    parser.add_argument("--fast-tier-only", action="store_true", help="time only the fast tier (suite_time.json)")
    parser.add_argument(
        "--only", nargs="+", choices=MEASUREMENTS, help="measure only these (the results file holds only them)"
    )
    args = parser.parse_args()
    earlier_root = add_worktree(args.against)
    this_sha = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, text=True).strip()
    results: dict = {"this": this_sha, "earlier": earlier_root.name.rsplit("-", 1)[1], "runs": args.runs}
    with tempfile.TemporaryDirectory() as scratch:
        this, earlier = Tree("this", REPO_ROOT, Path(scratch)), Tree("earlier", earlier_root, Path(scratch))
        trees = [this, earlier]
        if args.suite_only or args.fast_tier_only:
            results.update(suite_times(trees, args.runs, whole_suite=args.suite_only))
            if args.fast_tier_only and (RESULTS / "suite_time.json").exists():  # keep the whole-suite figures
                earlier_file = json.loads((RESULTS / "suite_time.json").read_text(encoding="utf-8"))
                results["suite"] = {
                    "command": earlier_file.get("command"),
                    "this_commit": earlier_file.get("this"),
                    **earlier_file.get("suite", {}),
                }
            return finish(results, earlier_root, "suite_time.json")
        wanted = set(args.only or MEASUREMENTS)
        peer = Tree("peer", REPO_ROOT, Path(scratch))
        if "help" in wanted:
            help_times = paired(
                [this, earlier, peer],
                lambda t, _: [sys.executable, "-c", "import pandas"] if t is peer else rag_eval("--help"),
                args.runs,
            )
            results["help"] = with_ratio(help_times, "this", "earlier")
        if wanted & {"gate", "gate_blocked"}:
            for tree in trees:  # the demo tenant's golden set and first baseline, once per tree
                tree.timed(rag_eval("demo"))
        if "gate" in wanted:
            results["gate"] = this_against_earlier(
                trees, lambda t, run: rag_eval("gate", "--tenant", "demo", "--candidate", f"bench-{run}"), args.runs
            )
        if "gate_blocked" in wanted:  # a retriever that returns nothing: every retrieval metric drops, exit 1
            results["gate_blocked"] = this_against_earlier(
                trees,
                lambda t, run: rag_eval(
                    "gate", "--tenant", "demo", "--candidate", f"bad-{run}", "--entry", DEGRADED_CANDIDATE
                ),
                args.runs,
                expect=1,
            )
        if "lineage_demo" in wanted:
            results["lineage_demo"] = this_against_earlier(
                trees,
                lambda t, run: [
                    sys.executable,
                    str(REPO_ROOT / "benchmarks" / "lineage_run.py"),  # one harness (an earlier one may be broken)
                    "--docs",
                    "data/tenants/demo",
                    "--name",
                    "demo",
                    "--print-only",  # timed here; lineage_demo.json stays the committed measurement
                ],
                max(1, args.runs // 2),
            )
        if "offline_throughput" in wanted:
            results["offline_throughput"] = this_against_earlier(
                trees,
                lambda t, run: [sys.executable, "benchmarks/offline_throughput.py"],
                max(1, args.runs // 2),
                read=results_of("offline_throughput.json", "triplets_per_s", "peak_rss_mib", "median_embedding_share"),
            )
        if "synthesis_cold" in wanted:
            results["synthesis_cold"] = this_against_earlier(
                trees,
                lambda t, run: [
                    sys.executable,
                    "benchmarks/synthesis_throughput.py",
                    "--skip-llm",
                    "--repeats",
                    "1",
                ],
                max(1, args.runs // 2),
                read=results_of(
                    "synthesis_throughput.json",
                    "offline.cold.verified_per_hour",
                    "offline.cold.wall_s",
                    "offline.cold.verified",
                    "offline.cold.gold_in_top5_share",
                ),
            )
        if args.suite:
            results.update(suite_times(trees, args.runs))
    finish(results, earlier_root, "compare_commits.json")


def suite_times(trees: list[Tree], runs: int, whole_suite: bool = True) -> dict:
    """The whole suite once per tree, and the fast tier `runs` times per tree, in turn."""
    suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    results = {}
    measurements = [("fast_tier", lambda tree: [*suite, "-m", fast_tier_of(tree.root)], runs)]
    if whole_suite:
        measurements.append(("suite", lambda tree: suite, 1))
    # Any exit status: a failing test is reported in the outcome line rather than losing the timings.
    for name, command, times in measurements:
        timings = paired(trees, lambda tree, _, command=command: command(tree), times, expect=None, bare=True)
        results[name] = with_ratio(timings, "this", "earlier")
        for tree in trees:
            results[name][tree.name]["outcome"] = tree.last_tail.strip().splitlines()[-1]
            results[name][tree.name]["failed"] = tree.last_failed
    results["fast_tier"]["marker_expression"] = {tree.name: fast_tier_of(tree.root) for tree in trees}
    return results


def finish(results: dict, earlier_root: Path, filename: str) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(earlier_root)], cwd=REPO_ROOT, check=False)
    results["command"] = " ".join([".venv/bin/python benchmarks/compare_commits.py", *sys.argv[1:]])
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / filename).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
