"""How well the offline judge agrees with labeled data, against a word-overlap baseline measured in the same run.

    .venv/bin/python benchmarks/judge_accuracy.py            # everything, including the embedding model
    .venv/bin/python benchmarks/judge_accuracy.py --no-embed # skip WikiQA answer relevance
    .venv/bin/python benchmarks/judge_accuracy.py --precision int8  # the model quantized (judge_accuracy_int8.json)

Reads the labeled sets from ../shared/benchmarks/ (see its README) at run time and writes
benchmarks/results/judge_accuracy.json. Two judges of statement support are compared:

- word-overlap: share of the statement's content words found in the contexts, supported at >= 0.75;
- offline-support-v2: `OfflineJudge.verify` (signals of rag_eval_pipeline.core.judging.offline_support),
  given the question, as the pipeline calls it. (The first offline judge, lexical coverage with number
  and negation checks, scored 0.783 pairwise F here; it is gone.)

Faithfulness F is the formula of core/metrics/builtin/faithfulness.py: supported statements / statements (binary verdicts); G is the
mean graded support score. On HaluEval, pairwise agreement is taken over records sharing `pair_id`
(good scored strictly above bad, ties half). Detection flags a record as hallucinated when F < 1.

Overfitting guard: pairs are split by the parity of the first byte of sha256(pair_id) into a tuning
half (even) and a held-out half (odd). The parity of the whole sha256 cannot be used: every pair_id in
halueval_qa_dev hashes to an even number, so the dev file is itself one parity half of a larger set.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_eval_pipeline.core.judging import offline_support  # noqa: E402
from rag_eval_pipeline.core.judging.judge import OfflineJudge  # noqa: E402
from rag_eval_pipeline.core.judging.offline_support import SIGNALS, assess_support  # noqa: E402
from rag_eval_pipeline.core.text import content_words  # noqa: E402

DATA = ROOT.parent / "shared" / "benchmarks"
RESULTS = ROOT / "benchmarks" / "results"
OVERLAP_THRESHOLD = 0.75


def load(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def split_of(pair_id: str) -> str:
    return "tune" if hashlib.sha256(pair_id.encode()).digest()[0] % 2 == 0 else "held_out"


# --- judges: each maps a record to (per-statement verdicts, per-statement graded scores) -------------

_STATEMENTS = OfflineJudge(embedder=None)  # statements() needs no embedder


def statements_of(answer: str) -> list[str]:
    """The judge's statements; an answer with none (e.g. a bare symbol) is checked whole."""
    return _STATEMENTS.statements(answer) or [answer]


def judge_overlap(record: dict) -> tuple[list[bool], list[float]]:
    context = set(content_words(" ".join(record["contexts"])))
    scores = []
    for statement in statements_of(record["answer"]):
        words = set(content_words(statement))
        scores.append(len(words & context) / len(words) if words else 0.0)
    return [s >= OVERLAP_THRESHOLD for s in scores], scores


def judge_offline(record: dict) -> tuple[list[bool], list[float]]:
    """The product's path: `OfflineJudge.verify`, given the question as the pipeline gives it."""
    verdicts = _STATEMENTS.verify(statements_of(record["answer"]), record["contexts"], record.get("question") or "")
    return [v.supported for v in verdicts], [v.score for v in verdicts]


def judge_v2(record: dict, disabled: frozenset[str] = frozenset()) -> tuple[list[bool], list[float]]:
    """`assess_support` directly, so single signals can be switched off for the ablation table."""
    found = [
        assess_support(s, record["contexts"], record.get("question") or "", disabled=disabled)
        for s in statements_of(record["answer"])
    ]
    return [a.supported for a in found], [a.score for a in found]


JUDGES = {"word-overlap": judge_overlap, "offline-support-v2": judge_offline}


# --- measures -----------------------------------------------------------------------------------------


def pairwise_agreement(records: list[dict], scores: list[float]) -> float | None:
    groups: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for record, score in zip(records, scores):
        groups[record["pair_id"]][0 if record["label"] == 1 else 1].append(score)
    total, count = 0.0, 0
    for good, bad in groups.values():
        for g in good:
            for b in bad:
                total += 1.0 if g > b else 0.5 if g == b else 0.0
                count += 1
    return round(total / count, 4) if count else None


def detection(labels: list[int], flagged: list[bool], hallucination_score: list[float]) -> dict:
    """Precision, recall and F1 for label 0 (hallucinated), and ROC-AUC of the graded score."""
    positives = [label == 0 for label in labels]
    tp = sum(p and f for p, f in zip(positives, flagged))
    fp = sum((not p) and f for p, f in zip(positives, flagged))
    fn = sum(p and not f for p, f in zip(positives, flagged))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    auc = roc_auc_score(positives, hallucination_score) if 0 < sum(positives) < len(positives) else None
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "roc_auc": round(auc, 4) if auc is not None else None,
        "accuracy": round(sum(p == f for p, f in zip(positives, flagged)) / len(labels), 4),
    }


def score_records(records: list[dict], judge) -> tuple[list[float], list[float]]:
    faithfulness, graded = [], []
    for record in records:
        verdicts, scores = judge(record)
        faithfulness.append(sum(verdicts) / len(verdicts))
        graded.append(statistics.fmean(scores))
    return faithfulness, graded


def halueval_figures(records: list[dict], judge) -> dict:
    faithfulness, graded = score_records(records, judge)
    out = {}
    for part in ("full", "tune", "held_out"):
        keep = [i for i, r in enumerate(records) if part == "full" or split_of(r["pair_id"]) == part]
        sub = [records[i] for i in keep]
        f, g = [faithfulness[i] for i in keep], [graded[i] for i in keep]
        out[part] = {
            "records": len(sub),
            "pairwise_F": pairwise_agreement(sub, f),
            "pairwise_graded": pairwise_agreement(sub, g),
            "detection": detection([r["label"] for r in sub], [x < 1.0 for x in f], [1.0 - x for x in g]),
        }
    return out


def ablations(records: list[dict]) -> dict:
    """Pairwise F and graded agreement with one signal switched off, and with only one signal on."""
    out = {}
    for signal in SIGNALS:
        without = halueval_figures(records, lambda r, s=signal: judge_v2(r, frozenset([s])))
        only = halueval_figures(records, lambda r, s=signal: judge_v2(r, frozenset(SIGNALS) - {s}))
        out[signal] = {
            f"{mode}_{part}_{measure}": figures[part][measure]
            for mode, figures in (("without", without), ("only", only))
            for part in ("full", "held_out")
            for measure in ("pairwise_F", "pairwise_graded")
        }
    none = halueval_figures(records, lambda r: judge_v2(r, frozenset(SIGNALS)))
    out["(no signal: bare rarity-weighted word presence)"] = {
        f"only_{part}_{measure}": none[part][measure]
        for part in ("full", "held_out")
        for measure in ("pairwise_F", "pairwise_graded")
    }
    no_question = halueval_figures(records, lambda r: judge_v2({**r, "question": ""}))
    out["(all signals, question withheld)"] = {
        f"only_{part}_{measure}": no_question[part][measure]
        for part in ("full", "held_out")
        for measure in ("pairwise_F", "pairwise_graded")
    }
    return out


def context_self_support(records: list[dict]) -> dict:
    """Every context sentence of 4+ words, taken as a statement, should be supported: a guard on strictness."""
    total = supported = 0
    seen = set()
    for record in records:
        for context in record["contexts"]:
            if context in seen:
                continue
            seen.add(context)
            for sentence in offline_support._sentences(context):
                if len(sentence.split()) >= 4:
                    total += 1
                    supported += assess_support(sentence, record["contexts"], record["question"]).supported
    return {"sentences": total, "supported_share": round(supported / total, 4) if total else None}


def ares_figures(records: list[dict]) -> dict:
    out = {}
    for name, judge in JUDGES.items():
        faithfulness, graded = score_records(records, judge)
        labels = [r["labels"]["Answer_Faithfulness_Label"] for r in records]
        out[name] = {"all": _agreement(labels, faithfulness, graded)}
        no_fever = [i for i, r in enumerate(records) if r["meta"].get("subset") != "fever"]
        out[name]["without_fever"] = _agreement(
            [labels[i] for i in no_fever], [faithfulness[i] for i in no_fever], [graded[i] for i in no_fever]
        )
    return out


def _agreement(labels: list[int], faithfulness: list[float], graded: list[float]) -> dict:
    verdict = [f == 1.0 for f in faithfulness]
    auc = roc_auc_score(labels, graded) if 0 < sum(labels) < len(labels) else None
    return {
        "records": len(labels),
        "accuracy": round(sum(v == bool(label) for v, label in zip(verdict, labels)) / len(labels), 4),
        "roc_auc": round(auc, 4) if auc is not None else None,
    }


def wikiqa_relevance(records: list[dict], precision: str) -> dict:
    from rag_eval_pipeline.core.embeddings import Embedder

    embedder = Embedder(precision=precision)
    scores = []
    for record in records:
        question, answer = embedder.embed([record["question"], record["answer"]])
        scores.append(max(0.0, float(question @ answer)))
    return {
        "records": len(records),
        "pairwise_answer_relevance": pairwise_agreement(records, scores),
        "method": f"cosine(question, answer), all-MiniLM-L6-v2 ({precision})",
    }


def timing(halueval: list[dict], ares: list[dict], count: int = 1000) -> dict:
    """Wall time for `count` (statement, contexts, question) triplets from a cold tokeniser cache."""
    pool = [(s, r["contexts"], r["question"]) for r in halueval + ares for s in statements_of(r["answer"])]
    triplets = [pool[i % len(pool)] for i in range(count)]
    offline_support._tokenize_cached.cache_clear()
    offline_support._stem.cache_clear()
    started = time.perf_counter()
    for statement, contexts, question in triplets:
        assess_support(statement, contexts, question)
    elapsed = time.perf_counter() - started
    return {"triplets": count, "distinct_triplets": min(count, len(pool)), "wall_s": round(elapsed, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-embed", action="store_true", help="skip WikiQA answer relevance (loads the model)")
    parser.add_argument("--precision", choices=("float32", "int8"), default="float32", help="the model's weights")
    args = parser.parse_args()

    halueval, ares = load("halueval_qa_dev.jsonl"), load("ares_fewshot.jsonl")
    results = {
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "split": "tune = first byte of sha256(pair_id) even, held_out = odd",
        "halueval_qa_dev": {name: halueval_figures(halueval, judge) for name, judge in JUDGES.items()},
        "halueval_ablations_v2": ablations(halueval),
        "halueval_context_self_support_v2": context_self_support(halueval),
        "ares_fewshot_faithfulness": ares_figures(ares),
        "timing_v2": timing(halueval, ares),
    }
    if not args.no_embed:
        results["wikiqa_sample"] = wikiqa_relevance(load("wikiqa_sample.jsonl"), args.precision)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "judge_accuracy.json" if args.precision == "float32" else f"judge_accuracy_{args.precision}.json"
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)


def print_table(results: dict) -> None:
    print("HaluEval QA dev: pairwise agreement (F binary / graded), detection of label 0 at F < 1")
    print(f"{'judge':<20} {'part':<9} {'pairF':>6} {'pairG':>6} {'prec':>6} {'rec':>6} {'F1':>6} {'AUC':>6}")
    for name, parts in results["halueval_qa_dev"].items():
        for part, fig in parts.items():
            d = fig["detection"]
            print(
                f"{name:<20} {part:<9} {fig['pairwise_F']:>6.3f} {fig['pairwise_graded']:>6.3f} "
                f"{d['precision']:>6.3f} {d['recall']:>6.3f} {d['f1']:>6.3f} {d['roc_auc']:>6.3f}"
            )
    print("\nSignal ablations for offline-support-v2 (pairwise F / graded)")
    for signal, fig in results["halueval_ablations_v2"].items():
        cells = "  ".join(f"{k}={v:.3f}" for k, v in fig.items() if v is not None)
        print(f"  {signal:<48} {cells}")
    print(f"\ncontext sentences judged supported: {results['halueval_context_self_support_v2']}")
    print("\nARES few-shot, agreement of F == 1 with Answer_Faithfulness_Label")
    for name, fig in results["ares_fewshot_faithfulness"].items():
        print(f"  {name:<20} all {fig['all']}  without fever {fig['without_fever']}")
    if "wikiqa_sample" in results:
        print(f"\nWikiQA answer relevance: {results['wikiqa_sample']}")
    print(f"\ntiming: {results['timing_v2']}")


if __name__ == "__main__":
    main()
