"""`rag-eval evaluate` and `rag-eval synthesize`: files in, files out; no tenant, no Dagster run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import (
    JudgeOptions,
    checked_metrics,
    judge_options,
    metrics_option,
    progress_logging,
    settings,
)
from rag_eval_pipeline.core.defaults import DEFAULT_MIX, MAX_FIELD_CHARS


@click.command(help="score a file of (question, contexts, answer, ground truth) rows")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(path_type=Path),
    help=f".jsonl, .csv, .parquet or .json (DeepEval test cases); a row with a text field over {MAX_FIELD_CHARS:,} characters is "
    "reported and not scored",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help=".jsonl, .csv or .parquet")
@metrics_option
@click.option("--k", type=int, default=5, show_default=True, help="cut-off for hit rate@k and MRR, at least 1")
@click.option(
    "--dry-run",
    is_flag=True,
    help="print the LLM calls and approximate tokens the scoring would take, per call kind, and how many the "
    "call cache answers; nothing is sent or written",
)
@judge_options()
def evaluate(input_path: Path, out: Path, metrics: str | None, k: int, dry_run: bool, judge: JudgeOptions) -> int:
    from rag_eval_pipeline.evaluation.evaluate import evaluate_rows
    from rag_eval_pipeline.evaluation.tabular import read_rows, to_items, write_table
    from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics

    chosen = _evaluate_checks(input_path, out, metrics, k, judge)  # every argument and the output path, first
    with progress_logging():
        rows = read_rows(input_path)
        if not rows:
            raise BadInput(f"input {input_path} holds no rows")
        items, bad_rows = to_items(rows)
        _report_input_problems(rows, bad_rows)
        if dry_run:
            click.echo(judge_plan([item for _, item in items], chosen, judge))
            return 0
        scorer, embedder = build_judge(judge)
        with _progress_bar(len(items)) as progress:
            result = evaluate_rows(rows, scorer, embedder, resolve_metrics(chosen), k, progress.update)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_table(result.frame, out)
    except OSError as error:  # e.g. the disk filled up while scoring
        raise BadInput(f"cannot write {out}: {error.strerror or error}") from None
    click.echo(result.table())
    click.echo(f"{len(items)} rows scored, {len(bad_rows)} invalid; judge {result.judge}; written to {out}")
    return 0


def _evaluate_checks(input_path: Path, out: Path, metrics: str | None, k: int, judge: JudgeOptions) -> tuple[str, ...]:
    """The metrics to score; BadInput with a one-line reason for any argument that cannot work."""
    from rag_eval_pipeline.evaluation.tabular import check_format, check_output_path

    chosen = checked_metrics(metrics)
    for option, value in (("--k", k), ("--concurrency", judge.concurrency)):
        if value < 1:
            raise BadInput(f"{option} must be at least 1, got {value}")
    if input_path.suffix.lower() != ".json":  # DeepEval test cases or goldens, read by read_rows
        check_format(input_path, "input")
    check_output_path(out)
    if out.resolve() == input_path.resolve():
        raise BadInput(f"--out {out} would overwrite the input")
    return chosen


def _report_input_problems(rows, bad_rows) -> None:
    from rag_eval_pipeline.evaluation.tabular import duplicate_ids

    for bad in bad_rows:
        click.echo(f"{bad.where} (id {bad.row_id}): {bad.reason}; not scored", err=True)
    for row_id, places in duplicate_ids(rows).items():
        click.echo(f"warning: id {row_id!r} is on {', '.join(places)}: each row is scored on its own", err=True)


def _progress_bar(rows: int):
    """A terminal always gets the bar; a log only when there is more than one batch to follow."""
    from tqdm import tqdm

    from rag_eval_pipeline.evaluation.evaluate import BATCH_SIZE

    quiet = rows < BATCH_SIZE and not sys.stderr.isatty()
    return tqdm(total=rows, unit="row", file=sys.stderr, disable=quiet)


@click.command(help="a folder of documents -> a verified golden set file (no tenant, no Dagster)")
@click.option("--docs", required=True, type=click.Path(path_type=Path), help="folder of PDF, Markdown and text files")
@click.option(
    "--out", required=True, type=click.Path(path_type=Path), help=".jsonl or .parquet; rejected items go beside it"
)
@click.option("--n", type=int, default=40, show_default=True, help="items to generate before verification")
@click.option(
    "--types",
    default=",".join(f"{t}={w}" for t, w in DEFAULT_MIX.items()),
    show_default=True,
    help="question types and weights, e.g. 'simple,unanswerable' or 'simple=3,multi_context=1'",
)
@click.option(
    "--generator",
    type=click.Choice(["offline", "llm"]),
    default="offline",
    show_default=True,
    help="writes the questions; llm uses the judge's server",
)
@click.option("--round-trip-k", type=int, default=5, show_default=True)
@click.option("--drop-on-retrieval-miss", is_flag=True)
@judge_options(judge_help="verifies the ground truths")
def synthesize(
    docs: Path,
    out: Path,
    n: int,
    types: str,
    generator: str,
    round_trip_k: int,
    drop_on_retrieval_miss: bool,
    judge: JudgeOptions,
) -> int:
    from rag_eval_pipeline.core.files import check_writable
    from rag_eval_pipeline.evaluation.tabular import write_table
    from rag_eval_pipeline.synthesis import pipeline
    from rag_eval_pipeline.synthesis.verification import VerificationSettings

    if out.suffix.lower() not in (".jsonl", ".parquet"):
        raise BadInput(f"--out must end in .jsonl or .parquet, got {out.name}")
    check_writable(out)  # before minutes of embedding, not after
    mix = pipeline.parse_mix(types)
    scorer, embedder = build_judge(judge)
    llm_settings = judge.llm_settings() if generator == "llm" else None  # checked before the folder is read
    verification = VerificationSettings(round_trip_k=round_trip_k, drop_on_retrieval_miss=drop_on_retrieval_miss)
    with progress_logging():  # embedding a large folder takes minutes: show how far it got
        result = pipeline.synthesize_folder(
            docs, generator, scorer, embedder, n, mix, verification, llm_settings, judge.cache
        )
    rejected_path = out.with_name(f"{out.stem}.rejected{out.suffix}")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_table(result.golden, out)
    write_table(result.rejected, rejected_path)
    for rejection in result.rejected_documents:
        click.echo(f"document {rejection.path} skipped: {rejection.reason}", err=True)
    click.echo(result.plan.to_markdown(index=False))
    click.echo(
        f"{len(result.golden)} verified items from {result.n_chunks} chunks written to {out}; "
        f"{len(result.rejected)} rejected (with reasons) in {rejected_path}"
    )
    return 0 if len(result.golden) else 1


def judge_plan(items, metrics, judge: JudgeOptions, tenant: str | None = None) -> str:
    """What judging the items would cost, from the call plan and the call cache (of tenant; None: the shared
    namespace, as `evaluate` uses), without a call."""
    from rag_eval_pipeline.core.metrics.registry import needed_judgements
    from rag_eval_pipeline.evaluation.user_metrics import resolve_metrics

    needs = needed_judgements(resolve_metrics(metrics))
    if judge.kind == "offline" or not needs:
        return (
            f"0 LLM calls ({'offline judge' if judge.kind == 'offline' else 'no judged metric'}) for {len(items)} items"
        )
    from rag_eval_pipeline.core.judging.llm_judge import cache_for_plan, plan_calls

    cache = cache_for_plan(judge.cache, tenant)
    return plan_calls(items, needs, judge.llm_settings(), judge.mode, cache=cache).describe()


def build_judge(judge: JudgeOptions):
    """(judge, embedder) of this command's options; the embeddings are cached in the warehouse."""
    from rag_eval_pipeline.core.judging.build import build_judge as built

    current = settings()
    return built(judge, current.warehouse_root, current.embedding_precision)
