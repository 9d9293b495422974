"""Do prediction-powered intervals cover the true mean at their nominal 95%, where the judge's own do not?

    .venv/bin/python benchmarks/ppi_coverage.py                 # 2,000 draws per n
    .venv/bin/python benchmarks/ppi_coverage.py --trials 200    # a quick look

On each labelled set of ../shared/benchmarks/ (read at run time; see its README), the offline judge scores
faithfulness once per record through the product's path (`score_items`, as `rag-eval evaluate` does).
The records the judge measured are the population; its "true mean" is the share the people labelled good.
Each draw labels n records at random (n = 25, 50, 100) and treats the rest as judge-scored only, then asks
four intervals to cover the true mean:

- judge only: the judge's mean over the unlabelled records with its normal 95% interval (what a tool
  that reports the judge's number and stops there can say);
- labels only: the labelled records' mean with its normal 95% interval (no judge at all);
- PPI: classical prediction-powered inference (lambda = 1);
- PPI++: the power-tuned form of the report's mean intervals (rag_eval_pipeline/core/trust/ppi.py); the
  gate's delta intervals use the classical form on each side.

Coverage is the share of draws whose interval holds the true mean; width is the median interval width
(narrower at the same coverage is better: the judge's scores buying precision over the labels alone).
Results go to benchmarks/results/ppi_coverage.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_eval_pipeline.core.embeddings import Embedder  # noqa: E402
from rag_eval_pipeline.core.judging.item import EvalItem  # noqa: E402
from rag_eval_pipeline.core.judging.judge import OfflineJudge  # noqa: E402
from rag_eval_pipeline.core.metrics.scoring import score_items  # noqa: E402
from rag_eval_pipeline.core.trust.ppi import Z_95, ppi_mean  # noqa: E402

DATA = ROOT.parent / "shared" / "benchmarks"
RESULTS = ROOT / "benchmarks" / "results" / "ppi_coverage.json"
SETS = ("halueval_qa_dev.jsonl", "frank_valid.jsonl")
LABEL_COUNTS = (25, 50, 100)
SEED = 20261202


def scored_population(name: str, judge: OfflineJudge, embedder: Embedder) -> tuple[np.ndarray, np.ndarray, dict]:
    """(judge faithfulness, human label) of every record the judge measured, and how many it did not."""
    records = [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [
        EvalItem(
            qa_id=str(r["id"]),
            question=r.get("question") or "",
            answer=r["answer"],
            contexts=[{"id": f"c{i}", "text": t} for i, t in enumerate(r["contexts"])],
            ground_truth=r.get("ground_truth") or "",
        )
        for r in records
    ]
    results, _ = score_items(items, judge, embedder, metrics=["faithfulness"])
    scores, labels, unmeasured = [], [], 0
    for record, (result,) in zip(records, results):
        if result.score is None:
            unmeasured += 1
            continue
        scores.append(result.score)
        labels.append(float(record["label"]))
    return np.array(scores), np.array(labels), {"records": len(records), "unmeasured_by_judge": unmeasured}


def draw_intervals(f: np.ndarray, y: np.ndarray, n: int, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    order = rng.permutation(len(y))
    labelled, unlabelled = order[:n], order[n:]
    judge_half = Z_95 * f[unlabelled].std(ddof=1) / np.sqrt(len(unlabelled))
    labels_half = Z_95 * y[labelled].std(ddof=1) / np.sqrt(n)
    classical = ppi_mean(f[unlabelled], f[labelled], y[labelled], tuned=False)
    tuned = ppi_mean(f[unlabelled], f[labelled], y[labelled], tuned=True)
    return {
        "judge_only": (f[unlabelled].mean() - judge_half, f[unlabelled].mean() + judge_half),
        "labels_only": (y[labelled].mean() - labels_half, y[labelled].mean() + labels_half),
        "ppi": (classical.low, classical.high),
        "ppi_plus_plus": (tuned.low, tuned.high),
    }


def coverage(f: np.ndarray, y: np.ndarray, n: int, trials: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    truth = float(y.mean())
    hits: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    for _ in range(trials):
        for method, (low, high) in draw_intervals(f, y, n, rng).items():
            hits.setdefault(method, []).append(low <= truth <= high)
            widths.setdefault(method, []).append(high - low)
    return {
        method: {
            "coverage": round(float(np.mean(hits[method])), 4),
            "median_width": round(float(np.median(widths[method])), 4),
        }
        for method in hits
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    embedder = Embedder()
    judge = OfflineJudge(embedder)
    started = time.time()
    sets = {}
    for name in SETS:
        f, y, counts = scored_population(name, judge, embedder)
        sets[name] = {
            **counts,
            "measured": int(len(y)),
            "true_mean": round(float(y.mean()), 4),
            "judge_mean": round(float(f.mean()), 4),
            "by_labels": {str(n): coverage(f, y, n, args.trials, SEED + n) for n in LABEL_COUNTS},
        }
        print(name, json.dumps(sets[name], indent=1))
    result = {
        "what": "coverage of 95% intervals of a faithfulness mean, by the number of labelled records",
        "nominal": 0.95,
        "trials": args.trials,
        "judge": judge.name,
        "metric": "faithfulness",
        "sets": sets,
        "seconds": round(time.time() - started, 1),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "command": "benchmarks/ppi_coverage.py" + (f" --trials {args.trials}" if args.trials != 2000 else ""),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
