"""Would a reviewer keep the offline questions? The share kept before and after a change, per type, the
precision of the quality stage's rejections, and what the change costs in verified pairs per hour.

    .venv/bin/python benchmarks/golden_quality.py --against 5d9265f [--n 100] [--repeats 3]
    .venv/bin/python benchmarks/golden_quality.py --against 5d9265f --corpus edge_cases   # held out
    .venv/bin/python benchmarks/golden_quality.py --against 5d9265f --corpus data/tenants/demo --n 40

Both trees (this checkout and the earlier commit, checked out with `git worktree` beside the repository,
as benchmarks/compare_commits.py does) synthesise a golden set from ../shared/corpus/pdfs (or another folder
with --corpus: ../shared/corpus/edge_cases and our demo tenant were not used to tune the rules) with the offline
generator and the offline judge, each in a fresh process, alternately, `--repeats` times, on one shared
embedding cache that a first untimed run warms. Throughput counts the whole ingest-to-golden-set path.

Every question in either golden set, and every question the quality stage rejected, is looked up in
benchmarks/labels/golden_quality.jsonl: our own keep/discard labels (one JSON object per line: question,
label, why), written by reading each question with its ground truth, without the stage's verdict. A reviewer
discards a question when it
  - is not a well-formed question (no question word or auxiliary, a dangling fragment, words run together);
  - asks about something that does not stand on its own: a pronoun, "There", a bare "the guide", a label
    such as "TIP:", a date, a page header, a section name used as a thing, a term cut mid-word, table debris;
  - (unanswerable) asks for a kind of fact that does not fit its topic (the budget of a poem);
  - names its source by page furniture ("the "Page 2/7" section", a title "1").
Questions not in the labels are listed and the run fails: label them and rerun.
Writes benchmarks/results/golden_quality.json (golden_quality_<corpus>.json for another corpus).
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
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"
LABELS = REPO_ROOT / "benchmarks" / "labels" / "golden_quality.jsonl"
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
TYPES = ("simple", "multi_context", "unanswerable")

# Runs in each tree's own process, that tree's code first on PYTHONPATH; the API used exists in both.
SYNTHESIS = r"""
import json, sys, time
from pathlib import Path
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.synthesis import pipeline
from rag_eval_pipeline.synthesis.offline_generation import OfflineGenerator

corpus, n, cache = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
embedder = Embedder(cache)
embedder.embed(["load the model before the clock starts"])
started = time.perf_counter()
result = pipeline.from_folder(corpus, lambda chunks: OfflineGenerator(chunks["text"].tolist()), OfflineJudge(embedder), embedder, n)
wall = time.perf_counter() - started
golden = result.golden.to_dict("records")
rejected = result.rejected[result.rejected["question"] != ""].to_dict("records")
print(json.dumps({
    "wall_s": wall,
    "generated": int(result.plan["generated"].sum()),
    "golden": [{k: str(r[k]) for k in ("question_type", "question", "ground_truth")} for r in golden],
    "rejected": [{k: str(r[k]) for k in ("question_type", "question", "ground_truth", "stage", "reason")} for r in rejected],
}))
"""


def add_worktree(revision: str) -> Path:
    sha = subprocess.check_output(["git", "rev-parse", "--short", revision], cwd=REPO_ROOT, text=True).strip()
    path = REPO_ROOT.parent / f".rag-eval-bench-{sha}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), sha], cwd=REPO_ROOT, check=True, capture_output=True
        )
    return path


def synthesise(tree: Path, corpus: Path, n: int, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", SYNTHESIS, str(corpus), str(n), str(cache)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"synthesis in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_labels() -> dict[str, dict]:
    labels = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines() if LABELS.exists() else []:
        if line.strip():
            row = json.loads(line)
            labels[row["question"]] = row
    return labels


def kept_share(rows: list[dict], labels: dict[str, dict]) -> dict:
    """Share of rows a reviewer keeps, per type and in all."""

    def share(subset: list[dict]) -> dict:
        keep = sum(labels[r["question"]]["label"] == "keep" for r in subset)
        return {"n": len(subset), "kept_by_reviewer": keep, "share": round(keep / len(subset), 3) if subset else None}

    return {"all": share(rows), **{t: share([r for r in rows if r["question_type"] == t]) for t in TYPES}}


def quality_rejections(run: dict, labels: dict[str, dict]) -> dict:
    rejected = [r for r in run["rejected"] if r["stage"] == "quality"]
    discard = [r for r in rejected if labels[r["question"]]["label"] == "discard"]
    wrongly = [{"question": r["question"], "reason": r["reason"]} for r in rejected if r not in discard]
    return {
        "rejected": len(rejected),
        "labelled_discard": len(discard),
        "precision": round(len(discard) / len(rejected), 3) if rejected else None,
        "kept_by_reviewer": wrongly,
    }


def stage_on_earlier_questions(run: dict, labels: dict[str, dict]) -> dict:
    """The quality stage (this tree's) applied to the earlier tree's golden questions, which it never saw:
    how well it separates what a reviewer discards, with no help from the generator's own topic."""
    from rag_eval_pipeline.synthesis.quality import assess

    verdicts = [(r, assess(r["question"], r["question_type"]).problem) for r in run["golden"]]
    rejected = [r for r, problem in verdicts if problem]
    discards = [r for r in run["golden"] if labels[r["question"]]["label"] == "discard"]
    caught = [r for r in rejected if labels[r["question"]]["label"] == "discard"]
    return {
        "questions": len(verdicts),
        "rejected": len(rejected),
        "labelled_discard": len(discards),
        "precision": round(len(caught) / len(rejected), 3) if rejected else None,
        "recall": round(len(caught) / len(discards), 3) if discards else None,
        "rejected_but_kept_by_reviewer": [
            {"question": r["question"], "reason": p}
            for r, p in verdicts
            if p and labels[r["question"]]["label"] == "keep"
        ],
    }


def unlabeled(runs: list[dict], labels: dict[str, dict]) -> list[dict]:
    seen, missing = set(), []
    for run in runs:
        for row in run["golden"] + [r for r in run["rejected"] if r["stage"] == "quality"]:
            if row["question"] not in labels and row["question"] not in seen:
                seen.add(row["question"])
                missing.append({k: row[k] for k in ("question_type", "question", "ground_truth")})
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the earlier commit (today's generator)")
    parser.add_argument("--n", type=int, default=100, help="items requested per golden set")
    parser.add_argument(
        "--corpus", default="pdfs", help="folder of ../shared/corpus (or of this repository) to synthesise from"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per tree")
    parser.add_argument("--unlabeled", type=Path, help="write the questions that lack a label here (JSONL) and stop")
    args = parser.parse_args()
    trees = {"before": add_worktree(args.against), "after": REPO_ROOT}
    corpus = SHARED_CORPUS / args.corpus if (SHARED_CORPUS / args.corpus).is_dir() else (REPO_ROOT / args.corpus)
    if not corpus.is_dir():
        raise SystemExit(f"no corpus folder {corpus}")
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch) / "embeddings.sqlite"
        for tree in trees.values():  # warm the shared cache with each tree's chunks, untimed
            synthesise(tree, corpus, args.n, cache)
        runs = {name: [] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                runs[name].append(synthesise(tree, corpus, args.n, cache))
    labels = read_labels()
    missing = unlabeled([runs["before"][0], runs["after"][0]], labels)
    if missing:
        if args.unlabeled:
            args.unlabeled.write_text(
                "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in missing), encoding="utf-8"
            )
        raise SystemExit(
            f"{len(missing)} questions have no label in {LABELS.name}"
            + (f"; listed in {args.unlabeled}" if args.unlabeled else "")
        )
    where = corpus.resolve()
    shown = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else where.relative_to(REPO_ROOT.parent)
    report = {
        "corpus": str(shown),
        "against": args.against,
        "n_requested": args.n,
        "repeats": args.repeats,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    for name in trees:
        first = runs[name][0]
        per_hour = [round(len(r["golden"]) / r["wall_s"] * 3600) for r in runs[name]]
        report[name] = {
            "generated": first["generated"],
            "verified": len(first["golden"]),
            "reviewer_keeps": kept_share(first["golden"], labels),
            "rejected_by_stage": dict(Counter(r["stage"] for r in first["rejected"])),
            "quality_stage": quality_rejections(first, labels),
            "wall_s": [round(r["wall_s"], 2) for r in runs[name]],
            "verified_per_hour_median": statistics.median(per_hour),
        }
    report["quality_stage_on_before_questions"] = stage_on_earlier_questions(runs["before"][0], labels)
    report["verified_per_hour_ratio_after_before"] = round(
        report["after"]["verified_per_hour_median"] / report["before"]["verified_per_hour_median"], 3
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "golden_quality.json" if args.corpus == "pdfs" else f"golden_quality_{Path(args.corpus).name}.json"
    (RESULTS / name).write_text(json.dumps(report, indent=2) + "\n")
    print_summary(report)


def print_summary(report: dict) -> None:
    print(f"{'':8} {'verified':>8} {'kept all':>9} " + " ".join(f"{t:>14}" for t in TYPES) + f" {'pairs/h':>8}")
    for name in ("before", "after"):
        side = report[name]
        keeps = side["reviewer_keeps"]
        cells = " ".join(
            f"{keeps[t]['kept_by_reviewer']:>5}/{keeps[t]['n']:<3} {keeps[t]['share'] or 0:>4.2f}" for t in TYPES
        )
        print(
            f"{name:8} {side['verified']:>8} {keeps['all']['share'] or 0:>9.2f} {cells} {side['verified_per_hour_median']:>8}"
        )
    quality = report["after"]["quality_stage"]
    earlier = report["quality_stage_on_before_questions"]
    print(
        f"quality stage in the new run: {quality['rejected']} rejected, {quality['labelled_discard']} labelled discard "
        f"(precision {quality['precision']})"
    )
    print(
        f"quality stage on the earlier golden set: {earlier['rejected']} of {earlier['questions']} rejected, precision "
        f"{earlier['precision']}, recall {earlier['recall']} of {earlier['labelled_discard']} labelled discard"
    )
    print(f"verified pairs per hour, after/before: {report['verified_per_hour_ratio_after_before']}")


if __name__ == "__main__":
    main()
