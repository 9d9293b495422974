"""Clustering at scale: wall time and peak memory at 2k / 10k / 20k / 50k chunks, this code against an earlier
commit's in the same run, and how far their clusters agree on a real corpus of 5,000+ chunks.

    .venv/bin/python benchmarks/clustering_curve.py [--against d3fcc95] [--sizes 2000 10000 20000 50000]
        [--peer-max 20000] [--real-chunks 9000]

Real chunks: the PDFs of ../shared/corpus (pdfs/ and edge_cases/) cut at the default chunk size and again at
60, 90, 140, 200 and 300 tokens (a tenant holding several editions of each), distinct texts, embedded once
with this code's MiniLM into benchmarks/.cache/ (embedding is not timed here; offline_throughput.py times it).
Synthetic chunks for the curve: a real chunk's vector moved by Gaussian noise (0.02 per dimension) and
normalised, drawn with a fixed seed, so the curve keeps the real corpus's density structure at any size.
Each measurement is a fresh process (`cluster_chunks` of the tree under test, imported from a `git archive`
of it; its peak RSS is the process's), the two trees alternating at each size; the earlier tree runs only up
to --peer-max chunks (it grows with the square: 20,000 took it minutes). Agreement on the real corpus:
adjusted Rand index of the two labellings, cluster counts, outlier agreement; the same figure for the earlier
code against itself on the chunks shuffled says how much HDBSCAN's tie-breaking alone moves.
Writes benchmarks/results/clustering_curve.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from chunk_clusters_wall_time import extract_peer  # the package at a commit, from `git archive`

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT.parent / "shared" / "corpus"
CACHE = REPO_ROOT / "benchmarks" / ".cache"
RESULTS = REPO_ROOT / "benchmarks" / "results"
EDITIONS = (None, 60, 90, 140, 200, 300)  # None: the default chunking
NOISE = 0.02


def real_chunks(limit: int) -> tuple[list[str], np.ndarray]:
    """Distinct chunk texts of the shared PDFs at several chunk sizes, and their vectors (cached)."""
    sys.path.insert(0, str(REPO_ROOT))
    from rag_eval_pipeline.core.embeddings import Embedder, progress_logger
    from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
    from rag_eval_pipeline.ingest.parsing import read_documents

    documents = [d for folder in ("pdfs", "edge_cases") for d in read_documents(CORPUS / folder).documents]
    texts: dict[str, None] = {}
    for tokens in EDITIONS:
        config = ChunkingSettings() if tokens is None else ChunkingSettings(tokens, tokens // 6)
        for document in documents:
            for chunk in chunk_document(document, config):
                texts.setdefault(asdict(chunk)["text"])
    chosen = list(texts)[:limit]
    CACHE.mkdir(parents=True, exist_ok=True)
    import logging

    logging.basicConfig(level=logging.INFO, format="  %(message)s")
    vectors = Embedder(CACHE / "embeddings.sqlite").embed(chosen, progress=progress_logger(logging.getLogger("embed")))
    return chosen, vectors


def synthetic(real: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    points = real[rng.integers(0, len(real), n)] + NOISE * rng.standard_normal((n, real.shape[1]))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def worker(code_root: str, vectors_path: str, out_path: str) -> None:
    sys.path.insert(0, code_root)
    import rag_eval_pipeline
    from rag_eval_pipeline.synthesis.clustering import cluster_chunks

    vectors = np.load(vectors_path)
    ids = [str(i) for i in range(len(vectors))]
    started, cpu = time.perf_counter(), time.process_time()
    frame = cluster_chunks(ids, vectors)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    np.save(out_path, frame["cluster_id"].to_numpy())
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "peak_rss_mib": peak_rss_mib(),
                "clusters": int(frame.loc[~frame["is_outlier"], "cluster_id"].nunique()),
                "outlier_share": round(float(frame["is_outlier"].mean()), 4),
                "package": str(Path(rag_eval_pipeline.__file__).parent),
            }
        )
    )


def peak_rss_mib() -> float:
    """This process's peak resident memory. Not getrusage's ru_maxrss: Linux carries that across exec, so
    a worker would report its parent's peak when it is higher."""
    status = Path("/proc/self/status").read_text()
    return round(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024, 1)


def timed(code_root: Path, vectors: np.ndarray, scratch: Path, timeout_s: float) -> tuple[dict, np.ndarray | None]:
    vectors_path, out_path = scratch / "vectors.npy", scratch / "labels.npy"
    np.save(vectors_path, vectors)
    command = [sys.executable, __file__, "--worker", str(code_root), str(vectors_path), str(out_path)]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=timeout_s, check=True)
    except subprocess.TimeoutExpired:
        return {"timed_out_after_s": timeout_s}, None
    run = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(run.pop("package")) != code_root / "rag_eval_pipeline":
        raise SystemExit(f"the run of {code_root} imported the package from elsewhere")
    return run, np.load(out_path)


def agreement(a: np.ndarray, b: np.ndarray) -> dict:
    from sklearn.metrics import adjusted_rand_score

    return {
        "adjusted_rand_index": round(float(adjusted_rand_score(a, b)), 4),
        "clusters": [int(len(set(a) - {-1})), int(len(set(b) - {-1}))],
        "outlier_status_equal_share": round(float(((a == -1) == (b == -1)).mean()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="d3fcc95")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 20000, 50000])
    parser.add_argument("--peer-max", type=int, default=20000, help="the earlier code runs up to this many chunks")
    parser.add_argument("--peer-timeout-s", type=float, default=1200)
    parser.add_argument("--real-chunks", type=int, default=9000)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)
    texts, real = real_chunks(args.real_chunks)
    results: dict = {
        "what": "cluster_chunks (HDBSCAN of the chunk vectors) in a fresh process; embedding not timed",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "real_corpus": {"chunks": len(texts), "source": "shared/corpus pdfs and edge_cases", "editions": EDITIONS},
        "synthetic": f"a real chunk's vector plus N(0, {NOISE}^2) per dimension, normalised",
    }
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "earlier").mkdir()
        results["earlier"] = extract_peer(args.against, scratch / "earlier")
        trees = {"this": REPO_ROOT, "earlier": scratch / "earlier"}
        # The real corpus: both trees, and the earlier one again on the chunks shuffled.
        real_runs, labels = {}, {}
        for name, root in trees.items():
            real_runs[name], labels[name] = timed(root, real, scratch, args.peer_timeout_s)
        order = np.random.default_rng(1).permutation(len(real))
        shuffled_run, shuffled = timed(trees["earlier"], real[order], scratch, args.peer_timeout_s)
        results["real_corpus"]["runs"] = real_runs
        if labels["earlier"] is not None and labels["this"] is not None and shuffled is not None:
            unshuffled = np.empty_like(shuffled)
            unshuffled[order] = shuffled
            results["real_corpus"]["this_vs_earlier"] = agreement(labels["earlier"], labels["this"])
            results["real_corpus"]["earlier_vs_itself_shuffled"] = agreement(labels["earlier"], unshuffled)
        curve = []
        for index, size in enumerate(args.sizes):
            vectors = synthetic(real, size)
            point: dict = {"chunks": size}
            for name in ("this", "earlier") if index % 2 == 0 else ("earlier", "this"):  # neither always first
                if name == "earlier" and size > args.peer_max:
                    point[name] = {"skipped": f"more than --peer-max {args.peer_max}"}
                    continue
                point[name], _ = timed(trees[name], vectors, scratch, args.peer_timeout_s)
                print(size, name, point[name], flush=True)
            if "wall_s" in point.get("earlier", {}):
                point["wall_ratio_this_to_earlier"] = round(point["this"]["wall_s"] / point["earlier"]["wall_s"], 3)
            curve.append(point)
        results["curve"] = curve
    results["command"] = " ".join([".venv/bin/python benchmarks/clustering_curve.py", *sys.argv[1:]])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "clustering_curve.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
