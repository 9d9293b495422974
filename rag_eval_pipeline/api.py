"""The Python API: `evaluate`, `aevaluate`, `synthesize` and `gate`, over the code the CLI and the assets run.

    from rag_eval_pipeline import evaluate
    result = evaluate(
        [{"question": "How long are logs kept?", "contexts": ["Logs are kept for 90 days."],
          "answer": "90 days.", "ground_truth": "Logs are kept for 90 days."}],
        metrics=["faithfulness", "answer_correctness"],
    )
    result.to_pandas()       # a row per input, a column per metric and its status, as `rag-eval evaluate` writes
    result.summary()         # per metric: the mean over the measured rows, and how many were measured
    result.unmeasured_reasons()

`judge` is the judge's options: None (RAG_EVAL_JUDGE_*, as the CLI reads them), "offline", "llm", or a dict of
options over those (e.g. {"kind": "llm", "base_url": "http://127.0.0.1:8000/v1", "model": "judge"}). `metrics`
names metrics as `--metrics` does, or passes them as objects (a function, a `criterion(...)`). Bad input raises
ValueError with a one-line message. The embedding model and the judge load on the first call, not on import.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from rag_eval_pipeline.core.judging.build import JudgeOptions
    from rag_eval_pipeline.core.metrics.metric import Metric
    from rag_eval_pipeline.evaluation.evaluate import EvaluationResult
    from rag_eval_pipeline.reporting.verdict import GateVerdict
    from rag_eval_pipeline.settings import Settings


class GateFailed(RuntimeError):
    """The audit's run failed before it wrote a verdict (its errors are the message)."""


def evaluate(data: Any, metrics: Iterable[Any] | None = None, judge: Any = None, k: int = 5) -> EvaluationResult:
    """Score rows of (question, contexts, answer, ground truth): a pandas DataFrame, a list of dicts, a RAGAS
    EvaluationDataset (or any object with `to_pandas()`), or the path of a .jsonl, .csv or .parquet file, with
    the column names `rag-eval evaluate` accepts (RAGAS's too)."""
    from rag_eval_pipeline.evaluation.evaluate import evaluate_rows

    rows, chosen, scorer, embedder = _prepared(data, metrics, judge, k)
    return evaluate_rows(rows, scorer, embedder, chosen, k)


async def aevaluate(data: Any, metrics: Iterable[Any] | None = None, judge: Any = None, k: int = 5) -> EvaluationResult:
    """evaluate() on the caller's event loop (a notebook's, a service's): the LLM judge's calls run on it."""
    from rag_eval_pipeline.evaluation.evaluate import aevaluate_rows

    rows, chosen, scorer, embedder = _prepared(data, metrics, judge, k)
    return await aevaluate_rows(rows, scorer, embedder, chosen, k)


def synthesize(
    docs: str | Path,
    n: int = 40,
    types: str | Mapping[str, float] | None = None,
    generator: str = "offline",
    judge: Any = None,
    round_trip_k: int = 5,
    drop_on_retrieval_miss: bool = False,
) -> pd.DataFrame:
    """A verified golden set from a folder of PDF, Markdown and text files, as a DataFrame (the rejected items
    and why are in its `attrs["rejected"]`). types: question types and weights, e.g. "simple,unanswerable" or
    {"simple": 3, "multi_context": 1} (default: the project's mix); generator: "offline" (templates) or "llm"
    (the judge's server)."""
    from rag_eval_pipeline.core.judging.build import build_judge
    from rag_eval_pipeline.synthesis import pipeline
    from rag_eval_pipeline.synthesis.verification import VerificationSettings

    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    mix = pipeline.parse_mix(types) if isinstance(types, str) else (dict(types) if types else None)
    options, current = _judge_options(judge), _settings()
    scorer, embedder = build_judge(options, current.warehouse_root, current.embedding_precision)
    verification = VerificationSettings(round_trip_k=round_trip_k, drop_on_retrieval_miss=drop_on_retrieval_miss)
    llm_settings = options.llm_settings() if generator == "llm" else None
    result = pipeline.synthesize_folder(
        Path(docs), generator, scorer, embedder, n, mix, verification, llm_settings, options.cache
    )
    golden = result.golden.reset_index(drop=True)
    golden.attrs["rejected"] = result.rejected
    return golden


def gate(
    tenant: str,
    candidate: str,
    *,
    outputs: str | Path | None = None,
    entry: str | None = None,
    version: str | None = None,
    baseline: str | None = None,
    tolerance: float | None = None,
    min_coverage: float | None = None,
    branch: str = "",
    main_branch: str = "main",
    rescore_baseline: bool = True,
    decide_on: str = "judge",
    metrics: Iterable[str] | None = None,
    junit: str | Path | None = None,
) -> GateVerdict:
    """Audit commit `candidate` of the tenant's RAG pipeline (its `outputs` file, its `entry` point, or the
    reference candidate) against the tenant's baseline, as `rag-eval gate` does; the verdict it prints.
    `verdict.exit_code` is the CLI's (0 pass, 1 regression, 2 cannot decide). Runs on this machine: through
    the gate service (RAG_EVAL_SERVER), use `rag-eval gate`."""
    import click

    from rag_eval_pipeline.cli.gate import GateRequest, run_gate
    from rag_eval_pipeline.cli.lineage import checked_commit
    from rag_eval_pipeline.cli.options import checked_metrics
    from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE

    current = _settings()
    if current.service.remote:
        raise ValueError("gate() runs the gate on this machine; with RAG_EVAL_SERVER set, run `rag-eval gate`")
    for name, value in (("tolerance", tolerance), ("min_coverage", min_coverage)):
        if value is not None and not (_is_number(value) and 0 <= value <= 1):
            raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
    if decide_on not in ("judge", "ppi"):
        raise ValueError(f"decide_on must be 'judge' or 'ppi', got {decide_on!r}")
    try:
        request = GateRequest(
            tenant,
            checked_commit(candidate, "candidate"),
            entry=entry,
            outputs=None if outputs is None else str(outputs),
            version=version,
            baseline=baseline,
            tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
            min_coverage=DEFAULT_MIN_COVERAGE if min_coverage is None else min_coverage,
            branch=branch,
            main_branch=main_branch,
            rescore_baseline=rescore_baseline,
            decide_on=decide_on,
            metrics=checked_metrics(_metric_names(metrics, current)),
            junit=None if junit is None else Path(junit),
        )
        done = run_gate(current, request)
    except click.ClickException as error:  # the CLI's one-line bad input, as the API's ValueError
        raise ValueError(error.format_message()) from None
    if done.verdict is None:
        raise GateFailed("; ".join(done.outcome.errors) or f"run {done.outcome.run_id} failed")
    return done.verdict


# ---- shared ------------------------------------------------------------------------------------


def _prepared(data: Any, metrics: Iterable[Any] | None, judge: Any, k: int):
    from rag_eval_pipeline.core.judging.build import build_judge

    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer of at least 1, got {k!r}")
    rows = _rows(data)
    if not rows:
        raise ValueError("no rows to evaluate")
    current = _settings()
    chosen = _metrics(metrics, current)
    scorer, embedder = build_judge(_judge_options(judge, current), current.warehouse_root, current.embedding_precision)
    return rows, chosen, scorer, embedder


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _metric_names(metrics: Iterable[str] | str | None, current: Settings) -> str | None:
    """The gate's metric set as `--metrics` takes it (a run names its metrics, objects cannot travel to it);
    None: RAG_EVAL_METRICS, else every built-in, as the command."""
    if metrics is None:
        return ",".join(current.metrics) or None
    chosen = [metrics] if isinstance(metrics, str) else list(metrics)
    if not all(isinstance(name, str) for name in chosen):
        raise ValueError("gate() takes metric names (a built-in's, package.module:function or an entry point's)")
    return ",".join(chosen)


def _rows(data: Any):
    import pandas as pd

    from rag_eval_pipeline.evaluation.tabular import read_rows, rows_from_frame, rows_from_records

    if isinstance(data, (str, Path)):
        return read_rows(Path(data))
    if isinstance(data, pd.DataFrame):
        return rows_from_frame(data)
    if hasattr(data, "to_pandas"):  # a RAGAS EvaluationDataset, a Hugging Face dataset
        return rows_from_frame(data.to_pandas())
    if isinstance(data, (list, tuple)):
        return rows_from_records(data)
    raise ValueError(
        "evaluate() takes a pandas DataFrame, a list of dicts, a RAGAS EvaluationDataset or the path of a "
        f".jsonl, .csv or .parquet file; got {type(data).__name__}"
    )


def _metrics(metrics: Iterable[Any] | None, current: Settings) -> tuple[Metric, ...]:
    from rag_eval_pipeline.core.judging.criteria import Criterion
    from rag_eval_pipeline.core.metrics.metric import Metric
    from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
    from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics

    if isinstance(metrics, str):  # "faithfulness,answer_relevance", as --metrics takes it
        metrics = [part.strip() for part in metrics.split(",") if part.strip()]
    elif isinstance(metrics, (Metric, Criterion)) or callable(metrics):  # one metric object
        metrics = [metrics]
    chosen = list(metrics) if metrics is not None else list(current.metrics or BUILTIN_METRICS)
    if not chosen:
        raise ValueError("metrics names no metric")
    return resolve_metrics(chosen)


def _judge_options(judge: Any, current: Settings | None = None) -> JudgeOptions:
    from pydantic import ValidationError

    from rag_eval_pipeline.core.judging.build import JudgeOptions

    current = current or _settings()
    if isinstance(judge, JudgeOptions):
        return judge
    if not (judge is None or isinstance(judge, (str, Mapping))):
        raise ValueError(f"judge is None, 'offline', 'llm' or a dict of judge options, got {type(judge).__name__}")
    overrides = {"kind": judge} if isinstance(judge, str) else dict(judge or {})
    try:
        validated = current.judge.model_validate({**current.judge.model_dump(), **overrides})
    except ValidationError as error:
        problem = error.errors()[0]
        raise ValueError(f"judge option {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None
    return JudgeOptions.from_settings(validated)


def _settings() -> Settings:
    from rag_eval_pipeline import settings

    return settings.load()
