"""Throughput of the offline judge: every metric on 1,000 triplets, on this machine's CPUs.

    .venv/bin/python benchmarks/offline_throughput.py [--precision int8]

Triplets are built at run time from ../shared/benchmarks/halueval_qa_dev.jsonl (cycled, each
question made distinct so no embedding is a cache hit). Three runs, each with a fresh in-memory
embedding cache; reports the median triplets per second, the split between embedding and the rest,
and the process's peak resident memory. Writes benchmarks/results/offline_throughput.json
(offline_throughput_int8.json with --precision int8).
"""

import argparse
import json
import platform
import resource
import statistics
import time
from pathlib import Path

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.core.minilm import PRECISIONS, shared_model

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "benchmarks" / "halueval_qa_dev.jsonl"
RESULTS = ROOT / "benchmarks" / "results"
N_TRIPLETS = 1000


def triplets() -> list[EvalItem]:
    records = [json.loads(line) for line in SOURCE.read_text().splitlines() if line.strip()]
    items = []
    for i in range(N_TRIPLETS):
        r = records[i % len(records)]
        suffix = "" if i < len(records) else f" (asked again, {i})"
        items.append(
            EvalItem(
                qa_id=str(i),
                question=r["question"] + suffix,
                answer=r["answer"],
                contexts=[{"id": f"{r['pair_id']}#{n}", "text": t} for n, t in enumerate(r["contexts"])],
                ground_truth=r["ground_truth"] or "",
                gold_chunk_ids=[f"{r['pair_id']}#0"],
            )
        )
    return items


def one_run(items: list[EvalItem], precision: str) -> dict:
    embedder = Embedder(precision=precision)  # fresh in-memory cache: every text is embedded
    judge = OfflineJudge(embedder)
    original_embed = embedder.embed
    embed_seconds = 0.0

    def timed_embed(texts):
        nonlocal embed_seconds
        started = time.perf_counter()
        try:
            return original_embed(texts)
        finally:
            embed_seconds += time.perf_counter() - started

    embedder.embed = timed_embed
    started = time.perf_counter()
    results, _ = score_items(items, judge, embedder, BUILTIN_METRICS, k=5)
    wall = time.perf_counter() - started
    measured = sum(r.status == "ok" for item_results in results for r in item_results)
    scores = {(item.qa_id, r.metric): (r.status, r.score) for item, rows in zip(items, results) for r in rows}
    return {"wall_s": round(wall, 2), "embedding_s": round(embed_seconds, 2), "scores_measured": measured}, scores


def score_changes(reference: dict, other: dict) -> dict:
    """Per metric: how the scores of `other` differ from `reference`'s on the same triplets."""
    changes = {}
    for metric in BUILTIN_METRICS:
        keys = [key for key in reference if key[1] == metric]
        both = [(reference[k][1], other[k][1]) for k in keys if reference[k][1] is not None and other[k][1] is not None]
        differences = [abs(a - b) for a, b in both]
        changes[metric] = {
            "status_changed": sum(reference[k][0] != other[k][0] for k in keys),
            "mean_abs_difference": round(statistics.fmean(differences), 5) if differences else 0.0,
            "max_abs_difference": round(max(differences), 4) if differences else 0.0,
            "mean": [round(statistics.fmean(a for a, _ in both), 4), round(statistics.fmean(b for _, b in both), 4)]
            if both
            else None,
        }
    return changes


def main() -> None:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", choices=PRECISIONS, default="float32")
    precision = parser.parse_args().precision
    shared_model(precision).encode(["warm the model up"])  # a one-off start-up cost, reported apart
    model_load_s = time.perf_counter() - started
    items = triplets()
    timed = [one_run(items, precision) for _ in range(3)]
    runs = [run for run, _ in timed]
    wall = statistics.median(r["wall_s"] for r in runs)
    figures = {
        "triplets": len(items),
        "embedding_precision": precision,
        "metrics": list(BUILTIN_METRICS),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "runs": runs,
        "model_load_s": round(model_load_s, 2),
        "median_wall_s": wall,
        "triplets_per_s": round(len(items) / wall, 1),
        "median_embedding_share": round(statistics.median(r["embedding_s"] / r["wall_s"] for r in runs), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if precision != "float32":  # what the quantized model changes: the same triplets scored at float32
        figures["scores_against_float32"] = score_changes(one_run(items, "float32")[1], timed[0][1])
    RESULTS.mkdir(exist_ok=True)
    name = "offline_throughput.json" if precision == "float32" else f"offline_throughput_{precision}.json"
    (RESULTS / name).write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
