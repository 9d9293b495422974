"""Seconds per triplet of the LLM judge on a vLLM judge node, against the design's 5 s per triplet (8B judge).

A prepared run for a GPU machine: it starts one vLLM node through the project's own lifecycle code
(rag_eval_pipeline/core/llm/nodes.py: vLLM from its own venv, a local model folder, FP8 weights, priority
scheduling), scores N triplets with our `LLMJudge` in process (faithfulness, answer relevance, context
recall, context precision: the four metrics its calls serve), in batches, and reports seconds per triplet:
the median and p95 over batches (batch wall time / triplets in it, `--concurrency` calls in flight), and
the median and p95 of single triplets scored alone (one triplet's latency). The triplets are built from
../shared/benchmarks/halueval_qa_dev.jsonl, one per question (its variants in turn: the right answer or a
hallucinated one), so no two share a judge call and the fresh in-memory call cache answers nothing.

    # on the GPU machine (vLLM in a venv of its own; the model folder holds the weights, nothing is downloaded)
    .venv/bin/python benchmarks/vllm_judge_latency.py --vllm-venv /opt/vllm-venv --model /models/Meta-Llama-3-8B-Instruct --n 200 --batch 20 --concurrency 32
    # anywhere: the llama.cpp server with SmolLM2-135M through the same node code (proves the script only)
    .venv/bin/python benchmarks/vllm_judge_latency.py --stand-in llama-cpp --n 6 --batch 2 --single 2

The stand-in mode writes a results file marked `stand_in: true`: plumbing, not the GPU figure, and the
target is not judged on it. Writes benchmarks/results/vllm_judge_latency.json (or `--out`) and prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's code, whatever else is installed

DATA = ROOT.parent / "shared" / "benchmarks" / "halueval_qa_dev.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "vllm_judge_latency.json"
METRICS = ("faithfulness", "answer_relevance", "context_recall", "context_precision")
SLA_S_PER_TRIPLET = 5.0  # the design: < 5 s per triplet with a local quantized 8B judge on vLLM
STAND_IN_NOTE = (
    "STAND-IN PLUMBING, NOT THE GPU FIGURE: the llama.cpp server with SmolLM2-135M on this machine's CPUs, "
    "serving one request at a time, started and stopped through the same node lifecycle code as a vLLM node. "
    "It proves the script end to end; its seconds say nothing about an 8B judge on vLLM, and the 5 s target "
    "is not judged on it. Run the GPU command in the script's docstring for the real figure."
)


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stand-in", choices=["llama-cpp"], help="no GPU: the llama.cpp server with SmolLM2")
    parser.add_argument("--vllm-venv", type=Path, help="vLLM's own virtual environment (its bin/vllm is run)")
    parser.add_argument("--model", type=Path, help="a local model folder (an 8B instruct model)")
    parser.add_argument("--served-model-name", default="judge")
    parser.add_argument("--quantization", default="fp8", choices=["fp8", "awq", "none"])
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--port", type=int, default=0, help="the node's port; 0: a free one")
    parser.add_argument("--n", type=int, default=100, help="triplets scored in batches")
    parser.add_argument("--batch", type=int, default=10, help="triplets per batch")
    parser.add_argument("--single", type=int, default=5, help="triplets scored alone, for one triplet's latency")
    parser.add_argument("--concurrency", type=int, help="judge calls in flight (default: 32 on vLLM, 1 stand-in)")
    parser.add_argument("--mode", default="decomposed", choices=["decomposed", "fused"])
    parser.add_argument("--timeout-s", type=float, default=120.0, help="one judge call's limit")
    parser.add_argument("--startup-timeout-s", type=float, default=1200.0)
    parser.add_argument("--log-dir", type=Path, help="the node's log; default: a temporary folder, kept")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    if not DATA.is_file():
        fail(f"{DATA} is missing: the triplets are built from ../shared/benchmarks")
    if min(args.n, args.batch) < 1 or args.single < 0 or (args.concurrency is not None and args.concurrency < 1):
        fail("--n, --batch and --concurrency must be at least 1, --single at least 0")
    if args.stand_in:
        return
    if args.vllm_venv is None or args.model is None:
        fail("name --vllm-venv and --model (or run --stand-in llama-cpp where there is no GPU)")
    if not (args.vllm_venv / "bin" / "vllm").is_file():
        fail(f"{args.vllm_venv}/bin/vllm does not exist: install vLLM into a venv of its own")
    if not args.model.is_dir():
        fail(f"the model folder {args.model} does not exist")


def triplets(n: int) -> list[dict]:
    """One triplet per HaluEval question, its right and hallucinated answers in turn, the first n."""
    by_pair: dict[str, list[dict]] = {}
    with open(DATA, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                by_pair.setdefault(record.get("pair_id") or record["id"], []).append(record)
    rows = [variants[i % len(variants)] for i, variants in enumerate(by_pair.values())]
    if len(rows) < n:
        fail(f"--n {n}: {DATA.name} has {len(rows)} distinct questions")
    return rows[:n]


def node_spec(args: argparse.Namespace, port: int):
    from rag_eval_pipeline.core.llm.nodes import LlamaCppNodeSpec, VLLMNodeSpec

    if args.stand_in:
        from rag_eval_pipeline_tests.support.local_llm_server import smollm2_model_path

        return LlamaCppNodeSpec(model=str(smollm2_model_path()), port=port, model_alias=args.served_model_name)
    return VLLMNodeSpec(
        model=str(args.model),
        port=port,
        executable=str(args.vllm_venv / "bin" / "vllm"),
        served_model_name=args.served_model_name,
        quantization=args.quantization,
        kv_cache_dtype=args.kv_cache_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile (with few values, the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summary(values: list[float]) -> dict:
    if not values:
        return {"median": None, "p95": None, "values": []}
    return {
        "median": round(statistics.median(values), 3),
        "p95": round(p95(values), 3),
        "values": [round(v, 3) for v in values],
    }


def judge_for(args: argparse.Namespace, base_url: str, model: str):
    from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
    from rag_eval_pipeline.core.llm.cache import LLMCallCache
    from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM

    settings = LLMSettings(
        base_url=base_url,
        model=model,
        response_format="json_object_schema" if args.stand_in else "json_schema",
        concurrency=args.concurrency or (1 if args.stand_in else 32),
        timeout_s=args.timeout_s,
    )
    return LLMJudge(StructuredLLM(settings, LLMCallCache()), mode=args.mode)


def eval_items(rows: list[dict]) -> list:
    from rag_eval_pipeline.core.judging.item import EvalItem

    return [
        EvalItem(
            qa_id=row["id"],
            question=row["question"],
            answer=row["answer"],
            contexts=[{"id": f"{row['id']}#{i}", "text": text} for i, text in enumerate(row["contexts"])],
            ground_truth=row.get("ground_truth") or "",
        )
        for row in rows
    ]


def timed_batches(items: list, size: int, judge, embedder) -> tuple[list[float], list, list]:
    """Seconds per triplet of each batch, with every result and judgement."""
    from rag_eval_pipeline.core.metrics.scoring import score_items

    per_triplet, results, judgements = [], [], []
    for start in range(0, len(items), size):
        batch = items[start : start + size]
        started = time.perf_counter()
        batch_results, batch_judgements = score_items(batch, judge, embedder, METRICS)
        per_triplet.append((time.perf_counter() - started) / len(batch))
        results += batch_results
        judgements += batch_judgements
        print(f"batch {start // size + 1}: {per_triplet[-1]:.2f} s per triplet", file=sys.stderr, flush=True)
    return per_triplet, results, judgements


def outcomes(results: list) -> dict:
    """Per metric, how many triplets got a score and why the others did not."""
    out = {}
    for index, metric in enumerate(METRICS):
        each = [item_results[index] for item_results in results]
        out[metric] = {
            "scored": sum(o.status == "ok" for o in each),
            "unmeasured": dict(Counter(o.reason[:100] for o in each if o.status != "ok")),
        }
    return out


def usage(judgements: list) -> dict:
    from rag_eval_pipeline.core.judging.judgement import total_usage

    totals = Counter()
    for counts in total_usage(judgements).values():
        totals.update({k: v for k, v in counts.items() if isinstance(v, int)})
    return dict(totals)


def machine() -> dict:
    gpu = ""
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]
        gpu = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    return {"platform": platform.platform(), "python": platform.python_version(), "gpu": gpu or "none"}


def warm_up(base_url: str, model: str) -> None:
    """One tiny untimed request, so that no batch pays the server's first-request costs."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=600)
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=1)


def measure(args: argparse.Namespace, base_url: str, model: str) -> dict:
    from rag_eval_pipeline.core.embeddings import Embedder

    items = eval_items(triplets(args.n + args.single))
    embedder = Embedder()
    embedder.embed(["warm-up: the model loads once, outside the timing"])
    judge = judge_for(args, base_url, model)
    warm_up(base_url, model)
    per_triplet, results, judgements = timed_batches(items[: args.n], args.batch, judge, embedder)
    single, single_results, single_judgements = timed_batches(items[args.n :], 1, judge, embedder)
    batches = summary(per_triplet)
    return {
        "judge": {"mode": args.mode, **{k: getattr(judge.llm.settings, k) for k in ("response_format", "concurrency")}},
        "metrics": list(METRICS),
        "triplets": args.n,
        "batch_size": args.batch,
        "seconds_per_triplet": batches,
        "single_triplet_s": summary(single),
        "sla_s_per_triplet": SLA_S_PER_TRIPLET,
        "sla_met": None if args.stand_in else bool(batches["p95"] <= SLA_S_PER_TRIPLET),
        "llm_usage": usage(judgements),
        "llm_usage_single": usage(single_judgements),
        "outcomes": outcomes(results + single_results),
    }


def run(args: argparse.Namespace, argv: list[str]) -> dict:
    from rag_eval_pipeline.core.llm.nodes import NodeGroup

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="judge-node-"))
    spec = node_spec(args, args.port or free_port())
    started = time.perf_counter()
    with NodeGroup.of([spec], log_dir, startup_timeout_s=args.startup_timeout_s) as group:
        startup_s = time.perf_counter() - started
        print(f"{spec.name} ready in {startup_s:.1f} s at {group.base_url}", file=sys.stderr, flush=True)
        measured = measure(args, group.base_url, spec.model_name)
    command_line = [Path(spec.argv()[0]).name, *(a.removeprefix(f"{ROOT}/") for a in spec.argv()[1:])]
    server = {"kind": spec.kind, "argv": command_line, "startup_s": round(startup_s, 1)}  # no home folders
    head = {"what": "seconds per triplet of the LLM judge on a judge node started by core/llm/nodes.py"}
    if args.stand_in:
        head["note_stand_in"] = STAND_IN_NOTE
    command = shlex.join(["benchmarks/vllm_judge_latency.py", *argv])
    return {
        **head,
        "stand_in": bool(args.stand_in),
        "command": f".venv/bin/python {command}",
        "server": server,
        **measured,
        "machine": machine(),
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # A SIGTERM unwinds like Ctrl-C, so the node (and its GPU memory) is always stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from rag_eval_pipeline.core.llm.nodes import NodeError

    try:
        out = run(args, argv)
    except NodeError as error:
        fail(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: out[k] for k in ("seconds_per_triplet", "single_triplet_s", "sla_met")}, indent=1))


if __name__ == "__main__":
    main()
