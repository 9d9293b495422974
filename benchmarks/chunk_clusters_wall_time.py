"""Wall time of chunk_clusters' core (`pipeline.test_nodes`) on 2,000 chunks with a cold embedding cache.

    .venv/bin/python benchmarks/chunk_clusters_wall_time.py [--runs 3] [--peer-runs 3] [--peer-budget-s 1500]
    .venv/bin/python benchmarks/chunk_clusters_wall_time.py --busy 2      # a busy machine: 2 CPU-bound processes beside

Chunks come from the PDFs of ../shared/corpus (pdfs/ and edge_cases/): every chunk at the default size,
then the same documents cut again at 140 tokens (a tenant holding a second edition of each) until
2,000 distinct texts. Each run is a fresh process that loads the model (not timed), then times
test_nodes on an empty embedding cache: embedding, clustering, labelling, information scores, ranks.
The peer is the code at --peer-ref (the commit before batch-by-batch caching), extracted with
`git archive` into a temporary folder and imported from there by the same harness. Runs alternate
new/peer so machine load hits both alike; peer runs stop once they have used --peer-budget-s.
Each run records its CPU time too: on a quiet 2-core machine the wall time approaches cpu_s / 2.
`--busy N` keeps N CPU-bound processes (pure-Python loops) running beside every timed run.
Writes benchmarks/results/chunk_clusters_wall_time.json (chunk_clusters_wall_time_busy<N>.json with --busy).
"""

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT.parent / "shared" / "corpus"
RESULTS = REPO_ROOT / "benchmarks" / "results"
PEER_REF = "70b24f4a8f9b3ca8b2fd875da76d78e3914ed106"  # chunk_clusters before batch-by-batch caching
N_CHUNKS = 2000
SECOND_EDITION_TOKENS = 140


def build_chunks(path: Path, n_chunks: int) -> dict:
    import pandas as pd

    from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
    from rag_eval_pipeline.ingest.parsing import read_documents

    documents = [d for folder in ("pdfs", "edge_cases") for d in read_documents(CORPUS / folder).documents]
    rows, seen = [], set()
    for edition, config in (("", ChunkingSettings()), ("2nd/", ChunkingSettings(SECOND_EDITION_TOKENS, 25))):
        for chunk in (asdict(c) for d in documents for c in chunk_document(d, config)):
            if chunk["text"] not in seen:
                seen.add(chunk["text"])
                rows.append(chunk | {"chunk_id": edition + chunk["chunk_id"], "doc_id": edition + chunk["doc_id"]})
    chunks = pd.DataFrame(rows[:n_chunks])
    chunks.to_parquet(path)
    return {
        "chunks": len(chunks),
        "documents": int(chunks["doc_id"].nunique()),
        "mean_tokens": round(float(chunks["n_tokens"].mean()), 1),
        "source_pdfs": len(documents),
    }


def extract_peer(ref: str, into: Path) -> str:
    """The peer's package, as committed at `ref`; returns the full commit hash."""
    commit = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.Popen(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", commit, "rag_eval_pipeline"], stdout=subprocess.PIPE
    )
    with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
        tar.extractall(into, filter="data")
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    return commit


def worker(code_root: str, chunks_path: str, out_path: str) -> None:
    """One timed run in this process, importing rag_eval_pipeline from `code_root`; prints a JSON line."""
    sys.path.insert(0, code_root)
    import pandas as pd

    import rag_eval_pipeline
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.synthesis import pipeline

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="  %(asctime)s %(message)s")
    chunks = pd.read_parquet(chunks_path)
    try:  # ONNX Runtime (this code)
        from rag_eval_pipeline.core.minilm import shared_model

        shared_model().encode(["warm the model up"])
        runtime = "onnxruntime"
    except ImportError:  # sentence-transformers on torch (code before it)
        from rag_eval_pipeline.core.embeddings import _load_model  # pyright: ignore[reportAttributeAccessIssue]

        _load_model().encode(["warm the model up"], show_progress_bar=False)
        runtime = "torch"

    with tempfile.TemporaryDirectory() as scratch:
        embedder = Embedder(Path(scratch) / "embeddings.sqlite")
        load_before, cpu, started = os.getloadavg()[0], time.process_time(), time.perf_counter()
        frame = pipeline.test_nodes(chunks, embedder)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    frame.to_parquet(out_path)
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "load_1min_before": round(load_before, 2),
                "load_1min_after": round(os.getloadavg()[0], 2),
                "embedded": embedder.cache_misses,
                "clusters": int(frame.loc[frame["cluster_id"] >= 0, "cluster_id"].nunique()),
                "outliers": int((frame["cluster_id"] < 0).sum()),
                "test_nodes": int((frame["test_node_rank"] > 0).sum()),
                "runtime": runtime,
                "batch_size": embedder.batch_size,
                "package": str(Path(rag_eval_pipeline.__file__).parent),
            }
        )
    )


def timed_run(code_root: Path, chunks: Path, out: Path, timeout_s: float) -> dict | None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}  # each code sets its own
    command = [sys.executable, __file__, "--worker", str(code_root), str(chunks), str(out)]
    try:
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"the run of {code_root} exited {done.returncode}")
    run = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(run.pop("package")) != code_root / "rag_eval_pipeline":
        raise SystemExit(f"the run of {code_root} imported the package from elsewhere")
    return run


@contextlib.contextmanager
def cpu_hogs(n: int):
    """n processes that only burn CPU, stopped (by their own PIDs) afterwards."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def summary(runs: list[dict], n_chunks: int) -> dict:
    walls = [r["wall_s"] for r in runs]
    median = round(statistics.median(walls), 2)
    return {
        "runs": len(runs),
        "median_wall_s": median,
        "min_wall_s": min(walls),
        "max_wall_s": max(walls),
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
        "median_chunks_per_s": round(n_chunks / median, 1),
        "each": runs,
    }


def same_output(new_path: Path, peer_path: Path) -> dict:
    """How far the new output agrees with the peer's, chunk by chunk."""
    import pandas as pd
    from sklearn.metrics import adjusted_rand_score

    new, peer = (pd.read_parquet(p).set_index("chunk_id").sort_index() for p in (new_path, peer_path))
    return {
        "columns_equal": list(new.columns) == list(peer.columns),
        "cluster_adjusted_rand_index": round(float(adjusted_rand_score(peer["cluster_id"], new["cluster_id"])), 4),
        "cluster_id_equal_share": round(float((new["cluster_id"] == peer["cluster_id"]).mean()), 4),
        "cluster_label_equal_share": round(float((new["cluster_label"] == peer["cluster_label"]).mean()), 4),
        "information_equal_share": round(float((new["information"] == peer["information"]).mean()), 4),
        "test_node_rank_equal_share": round(float((new["test_node_rank"] == peer["test_node_rank"]).mean()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=N_CHUNKS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer-runs", type=int, default=3)
    parser.add_argument(
        "--peer-budget-s", type=float, default=1500, help="no further peer run once peer runs took this long"
    )
    parser.add_argument(
        "--peer-timeout-s", type=float, default=1200, help="a peer run this long is stopped and recorded as such"
    )
    parser.add_argument("--peer-ref", default=PEER_REF)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes kept running beside each run")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)
    sys.path.insert(0, str(REPO_ROOT))
    with tempfile.TemporaryDirectory() as scratch, cpu_hogs(args.busy):
        scratch = Path(scratch)
        corpus = build_chunks(scratch / "chunks.parquet", args.chunks)
        (scratch / "peer").mkdir()
        peer_commit = extract_peer(args.peer_ref, scratch / "peer")
        new_runs, peer_runs, peer_note = [], [], ""
        for run in range(max(args.runs, args.peer_runs)):
            if run < args.runs:
                print(f"new run {run + 1}", file=sys.stderr, flush=True)
                new_runs.append(timed_run(REPO_ROOT, scratch / "chunks.parquet", scratch / "new.parquet", 3600))
            if run < args.peer_runs and not peer_note:
                print(f"peer run {run + 1}", file=sys.stderr, flush=True)
                peer = timed_run(
                    scratch / "peer", scratch / "chunks.parquet", scratch / "peer.parquet", args.peer_timeout_s
                )
                if peer is None:
                    peer_note = f"peer run {run + 1} stopped after {args.peer_timeout_s:.0f} s; no further peer runs"
                else:
                    peer_runs.append(peer)
                    if sum(r["wall_s"] for r in peer_runs) >= args.peer_budget_s and run + 1 < args.peer_runs:
                        peer_note = (
                            f"peer runs stopped after {len(peer_runs)}: they used the {args.peer_budget_s:.0f} s budget"
                        )
        agreement = same_output(scratch / "new.parquet", scratch / "peer.parquet") if peer_runs else None
    figures = {
        "what": "pipeline.test_nodes (the core of the chunk_clusters asset) on a cold embedding cache; model load not timed",
        "corpus": {
            "source": "shared/corpus/pdfs and edge_cases",
            **corpus,
            "note": f"default chunking, then the same PDFs cut at {SECOND_EDITION_TOKENS} tokens, first {args.chunks} distinct texts",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "busy_processes_beside": args.busy,
            "load_1min_at_end": round(os.getloadavg()[0], 2),
        },
        "new": summary(new_runs, corpus["chunks"]),
        "peer": {
            "commit": peer_commit,
            **(summary(peer_runs, corpus["chunks"]) if peer_runs else {"runs": 0}),
            "capped": peer_note or None,
        },
        "ratio_peer_to_new_median_wall": round(
            statistics.median(r["wall_s"] for r in peer_runs) / statistics.median(r["wall_s"] for r in new_runs), 2
        )
        if peer_runs
        else None,
        "output_agreement_last_runs": agreement,
    }
    RESULTS.mkdir(exist_ok=True)
    name = f"chunk_clusters_wall_time_busy{args.busy}.json" if args.busy else "chunk_clusters_wall_time.json"
    (RESULTS / name).write_text(json.dumps(figures, indent=2) + "\n")
    print(
        json.dumps(
            {k: v for k, v in figures.items() if k not in ("new", "peer")}
            | {
                "new_median_wall_s": figures["new"]["median_wall_s"],
                "peer_median_wall_s": figures["peer"].get("median_wall_s"),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
