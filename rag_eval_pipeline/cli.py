"""`rag-eval`: register tenants and versions, run the lineage and the demo, synthesize and review golden sets."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from rag_eval_pipeline import settings
from rag_eval_pipeline.definitions import build_definitions
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.llm.client import RESPONSE_FORMATS, JudgeMisconfigured, JudgeUnavailable, LLMSettings
from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
from rag_eval_pipeline.core.judging.metrics import ALL_METRICS, score_items
from rag_eval_pipeline.evaluation.tabular import (
    MAX_FIELD_CHARS, check_format, check_output_path, duplicate_ids, read_rows, results_frame, summary_table,
    to_items, write_table,
)
from rag_eval_pipeline.instance import InstanceConfigError, local_instance
from rag_eval_pipeline.partitions import register_partition, require_registered
from rag_eval_pipeline.core.names import PartitionNameError
from rag_eval_pipeline.reporting.baseline_cli import add_commands as add_baseline_commands
from rag_eval_pipeline.reporting.baselines import BaselineStore
from rag_eval_pipeline.reporting.compare import DEFAULT_TOLERANCE
from rag_eval_pipeline.reporting.gate import ERROR, REGRESSED as BLOCKED, exit_code, write_junit
from rag_eval_pipeline.synthesis import pipeline as synthesis_pipeline
from rag_eval_pipeline.synthesis.pipeline import parse_mix
from rag_eval_pipeline.synthesis.planning import DEFAULT_MIX
from rag_eval_pipeline.synthesis.review_cli import add_commands
from rag_eval_pipeline.synthesis.verification import VerificationSettings
from rag_eval_pipeline.synthesis.versions import latest_version, read_manifest
from rag_eval_pipeline.core.warehouse import Warehouse
from rag_eval_pipeline.core.names import COMMIT_TAG, validate_commit

DEMO_TENANT, DEMO_VERSION = "demo", "v1"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (PartitionNameError, FileNotFoundError, InstanceConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-eval", description=__doc__)
    commands = parser.add_subparsers(required=True)

    register = commands.add_parser("register", help="register a tenant and a dataset version")
    _add_partition_args(register)
    register.set_defaults(handler=_register)

    run = commands.add_parser("run", help="materialize a job for a registered (tenant, version)")
    _add_partition_args(run)
    run.add_argument("--job", default="full_pipeline", choices=["full_pipeline", "synthesis", "audit"])
    _add_candidate_args(run)
    run.set_defaults(handler=_run)

    demo = commands.add_parser("demo", help="register the demo tenant and run the whole lineage for it")
    demo.add_argument("--version", default=DEMO_VERSION,
                      help="dataset version; a new one re-synthesizes the (immutable) golden set")
    _add_candidate_args(demo)
    demo.set_defaults(handler=_demo)

    evaluate = commands.add_parser("evaluate", help="score a file of (question, contexts, answer, ground truth) rows")
    evaluate.add_argument("--input", required=True, type=Path,
                          help=f".jsonl, .csv or .parquet; a row with a text field over {MAX_FIELD_CHARS:,} characters "
                               "is reported and not scored")
    evaluate.add_argument("--out", required=True, type=Path, help=".jsonl, .csv or .parquet")
    evaluate.add_argument("--metrics", default=",".join(ALL_METRICS), help="comma-separated, default: all")
    evaluate.add_argument("--k", type=int, default=5, help="cut-off for hit rate@k and MRR, at least 1")
    evaluate.add_argument("--judge", choices=["offline", "llm"], default="offline")
    _add_llm_args(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    synthesize = commands.add_parser(
        "synthesize", help="a folder of documents -> a verified golden set file (no tenant, no Dagster)"
    )
    synthesize.add_argument("--docs", required=True, type=Path, help="folder of PDF, Markdown and text files")
    synthesize.add_argument("--out", required=True, type=Path, help=".jsonl or .parquet; rejected items go beside it")
    synthesize.add_argument("--n", type=int, default=40, help="items to generate before verification")
    synthesize.add_argument("--types", default=",".join(f"{t}={w}" for t, w in DEFAULT_MIX.items()),
                            help="question types and weights, e.g. 'simple,unanswerable' or 'simple=3,multi_context=1'")
    synthesize.add_argument("--generator", choices=["offline", "llm"], default="offline")
    synthesize.add_argument("--judge", choices=["offline", "llm"], default="offline", help="verifies the ground truths")
    synthesize.add_argument("--round-trip-k", type=int, default=5)
    synthesize.add_argument("--drop-on-retrieval-miss", action="store_true")
    _add_llm_args(synthesize)
    synthesize.set_defaults(handler=_synthesize)
    gate = commands.add_parser(
        "gate", help="audit a candidate commit against the tenant's baseline: exit 0 pass, 1 regression, 2 error"
    )
    gate.add_argument("--tenant", required=True)
    gate.add_argument("--candidate", required=True, metavar="COMMIT", help="the candidate's commit sha")
    source = gate.add_mutually_exclusive_group()
    source.add_argument("--entry", help="'module:function' of the candidate pipeline (default: the reference candidate)")
    source.add_argument("--outputs", help="a .jsonl of precomputed outputs")
    gate.add_argument("--version", help="golden-set version (default: the tenant's latest published one)")
    gate.add_argument("--baseline", metavar="COMMIT", help="an audited commit to compare with (default: the current baseline)")
    gate.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, help="largest allowed drop of a mean")
    gate.add_argument("--branch", default="", help="the candidate's branch: a pass on the main branch promotes it")
    gate.add_argument("--main-branch", default="main", help="the branch whose passing candidates become the baseline")
    gate.add_argument("--junit", type=Path, help="also write the verdict per metric as JUnit XML")
    gate.add_argument("--no-rescore-baseline", dest="rescore_baseline", action="store_false",
                      help="exit 2 when the baseline was scored by another judge, k or metric set, instead of "
                           "re-scoring its archived outputs with the current judge")
    gate.set_defaults(handler=_gate)
    add_commands(commands)  # diff, review export, review import
    add_baseline_commands(commands)  # baseline show, baseline promote
    return parser


def _add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The OpenAI-compatible server of the LLM judge and generator."""
    parser.add_argument("--base-url", default=os.environ.get("RAG_EVAL_JUDGE_BASE_URL", ""))
    parser.add_argument("--model", default=os.environ.get("RAG_EVAL_JUDGE_MODEL", ""))
    parser.add_argument("--api-key", default=os.environ.get("RAG_EVAL_JUDGE_API_KEY", "not-needed"))
    parser.add_argument("--mode", choices=["decomposed", "fused"], default="decomposed")
    parser.add_argument("--response-format", choices=list(RESPONSE_FORMATS), default="json_schema",
                        help="json_schema for vLLM and OpenAI, json_object_schema for the llama.cpp server")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout-s", type=float,
                        default=os.environ.get("RAG_EVAL_JUDGE_TIMEOUT_S", str(LLMSettings.timeout_s)),
                        help="seconds one attempt of a call may take (default %(default)s)")
    parser.add_argument("--max-retries", type=int,
                        default=os.environ.get("RAG_EVAL_JUDGE_MAX_RETRIES", str(LLMSettings.max_retries)),
                        help="retries of a call on HTTP 408/409/429/5xx, a connection error or a timeout, "
                             "with jittered backoff that honours Retry-After (default %(default)s)")
    parser.add_argument("--cache", default=str(settings.warehouse_root() / "judge_cache.sqlite"),
                        help="on-disk cache of LLM calls ('' for none)")


def _add_partition_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--version", required=True, help="dataset version, e.g. v1")


def _add_candidate_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--candidate", default="reference", help="'reference', 'module:function' or outputs .jsonl")
    parser.add_argument("--commit", default="working-tree", help="the candidate's commit")
    parser.add_argument("--promote-baseline", action="store_true", help="make this candidate the baseline")


def _register(args) -> int:
    key = register_partition(local_instance(), args.tenant, args.version)
    print(f"registered tenant {args.tenant!r}, dataset version {args.version!r} ({key})")
    return 0


def _run(args) -> int:
    instance = local_instance()
    key = require_registered(instance, args.tenant, args.version)
    return _execute(instance, key, args)[0]


def _demo(args) -> int:
    instance = local_instance()
    key = register_partition(instance, DEMO_TENANT, args.version)
    args.tenant, args.job = DEMO_TENANT, "full_pipeline"
    status, _ = _execute(instance, key, args)
    if status == 0:
        print("Open the lineage in the Dagster UI:  make ui  (then http://127.0.0.1:3000)")
    return status


def _gate(args) -> int:
    if not _valid_commit(args.candidate, "--candidate"):
        return ERROR
    instance = local_instance()
    warehouse = Warehouse(settings.warehouse_root())
    version = args.version or latest_version(warehouse, args.tenant)
    if version is None:
        print(f"error: tenant {args.tenant!r} has no published golden set yet: run its synthesis job first", file=sys.stderr)
        return ERROR
    key = require_registered(instance, args.tenant, version)
    if read_manifest(warehouse, args.tenant, version) is None:
        print(f"error: the golden set of {args.tenant}/{version} is not published (its synthesis did not finish or "
              "its checks failed): nothing to gate on", file=sys.stderr)
        return ERROR
    audited = BaselineStore(warehouse).audited_commits(args.tenant, version)
    if args.baseline and args.baseline not in audited:
        known = ", ".join(audited) or "none yet"
        print(f"error: baseline commit {args.baseline!r} was never audited on {args.tenant}/{version} "
              f"(audited commits: {known})", file=sys.stderr)
        return ERROR
    run = argparse.Namespace(
        tenant=args.tenant, version=version, job="audit", candidate=args.entry or args.outputs or "reference",
        commit=args.candidate, promote_baseline=False, tolerance=args.tolerance,
        baseline_commit=args.baseline or "", branch=args.branch, main_branch=args.main_branch,
        rescore_baseline=args.rescore_baseline,
    )
    status, run_id = _execute(instance, key, run)
    if status == ERROR:  # a blocked run still wrote its report: the verdict decides
        return ERROR
    # This run's own report, never another audit's, even when several gates of the tenant run at once.
    folder = warehouse.audit_dir(args.tenant, version, args.candidate, run_id)
    report = pd.read_parquet(folder / "regression_report.parquet")
    verdict = str(report["verdict_overall"].iloc[0])
    failing = report.loc[report["verdict"] == "regressed", "metric"].tolist()
    if args.junit:
        print(f"JUnit XML: {write_junit(report, f'rag-eval gate {args.tenant}/{version}', args.junit)}")
    print(f"gate: {verdict.upper()} for commit {args.candidate} on {args.tenant}/{version}"
          + (f"; regressed: {', '.join(failing)}" if failing else ""))
    print(f"baseline: {report['baseline_commit'].iloc[0]}")
    if "re-scored" in report["baseline_source"].iloc[0]:
        print(f"note: {report['baseline_source'].iloc[0].split('; ', 1)[1]}")
    if report["promoted_to_baseline"].iloc[0]:
        print(f"{args.candidate} is now the baseline: {report['promoted_to_baseline'].iloc[0]}")
    print(f"report: {folder / 'regression_report.md'}")
    return exit_code(verdict)


def _valid_commit(commit: str, option: str) -> bool:
    """Checked before any work: a bad commit must not cost a synthesis or an audit."""
    try:
        validate_commit(commit)
        return True
    except ValueError as error:
        print(f"error: {option}: {error}", file=sys.stderr)
        return False


def _execute(instance, key, args) -> tuple[int, str]:
    """Run a job for one partition: (exit status, run id)."""
    if not _valid_commit(args.commit, "--commit"):
        return ERROR, ""
    report_config = {"promote_to_baseline": args.promote_baseline}
    for option in ("tolerance", "baseline_commit", "branch", "main_branch", "rescore_baseline"):  # only the gate sets these
        if getattr(args, option, None) is not None:
            report_config[option] = getattr(args, option)
    run_config = {
        "ops": {
            "candidate_outputs": {"config": {"candidate": args.candidate, "commit": args.commit}},
            "regression_report": {"config": report_config},
        },
        # Dagster's own step events stay in the run log (and the UI); the terminal shows warnings.
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    job = build_definitions().resolve_job_def(args.job)
    selected = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    run_config["ops"] = {name: value for name, value in run_config["ops"].items() if name in selected}
    started = time.perf_counter()
    result = job.execute_in_process(run_config=run_config, instance=instance, partition_key=key,
                                    tags={COMMIT_TAG: args.commit}, raise_on_error=False)
    elapsed = time.perf_counter() - started
    if result.success:
        _print_summary(args, result.run_id, elapsed)
        return 0, result.run_id
    failed_checks = _print_failed_checks(result)
    failed_steps = [event for event in result.all_events if event.is_step_failure]
    if failed_checks and all(_is_check_step(event.step_key, failed_checks) for event in failed_steps):
        # Every asset ran; a blocking check said no (a regression, a golden set that fails its suite).
        _print_summary(args, result.run_id, elapsed)
        print(f"run {result.run_id} blocked by {', '.join(sorted(failed_checks))}", file=sys.stderr)
        return BLOCKED, result.run_id
    for event in failed_steps:
        print(f"error in {event.step_key}: {_root_cause(event.step_failure_data.error)}", file=sys.stderr)
    print(f"run {result.run_id} failed after {elapsed:.1f} s", file=sys.stderr)
    return ERROR, result.run_id


def _evaluate(args) -> int:
    try:
        metrics = _evaluate_checks(args)  # every argument and the output path, before any work
        rows = read_rows(args.input)
        if not rows:
            raise ValueError(f"input {args.input} holds no rows")
        items, bad_rows = to_items(rows)
        _report_input_problems(rows, bad_rows)
        judge, embedder = _cli_judge(args)
        results = _score_with_progress(items, judge, embedder, metrics, args.k)
    except (ValueError, OSError, JudgeUnavailable, JudgeMisconfigured) as error:  # OSError: e.g. an unreadable input
        print(f"error: {error}", file=sys.stderr)
        return 2
    output = results_frame(rows, items, results, bad_rows, metrics)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_table(output, args.out)
    except OSError as error:  # e.g. the disk filled up while scoring
        print(f"error: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return 2
    print(summary_table(output, metrics))
    print(f"{len(items)} rows scored, {len(bad_rows)} invalid; judge {judge.name}; written to {args.out}")
    return 0


def _evaluate_checks(args) -> tuple[str, ...]:
    """The metrics to score; ValueError with a one-line reason for any argument that cannot work."""
    metrics = tuple(dict.fromkeys(m.strip() for m in args.metrics.split(",") if m.strip()))
    if not metrics:
        raise ValueError(f"--metrics names no metric; known: {', '.join(ALL_METRICS)}")
    unknown = set(metrics) - set(ALL_METRICS)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: {', '.join(ALL_METRICS)}")
    for option, value in (("--k", args.k), ("--concurrency", args.concurrency)):
        if value < 1:
            raise ValueError(f"{option} must be at least 1, got {value}")
    check_format(args.input, "input")
    check_output_path(args.out)
    if args.out.resolve() == args.input.resolve():
        raise ValueError(f"--out {args.out} would overwrite the input")
    return metrics


def _report_input_problems(rows, bad_rows) -> None:
    for bad in bad_rows:
        print(f"{bad.where} (id {bad.row_id}): {bad.reason}; not scored", file=sys.stderr)
    for row_id, places in duplicate_ids(rows).items():
        print(f"warning: id {row_id!r} is on {', '.join(places)}: each row is scored on its own", file=sys.stderr)


def _synthesize(args) -> int:
    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        print(f"error: --out must end in .jsonl or .parquet, got {args.out.name}", file=sys.stderr)
        return 2
    try:
        mix = parse_mix(args.types)
        judge, embedder = _cli_judge(args)
        # The server settings are checked before the folder is read and embedded.
        llm_settings = _llm_settings(args) if args.generator == "llm" else None
        make_generator = lambda chunks: synthesis_pipeline.build_generator(  # noqa: E731
            args.generator, chunks["text"].tolist(), lambda: llm_settings, args.cache
        )
        result = synthesis_pipeline.from_folder(
            args.docs, make_generator, judge, embedder, args.n, mix,
            VerificationSettings(round_trip_k=args.round_trip_k, drop_on_retrieval_miss=args.drop_on_retrieval_miss),
        )
    except (ValueError, FileNotFoundError, JudgeUnavailable, JudgeMisconfigured) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rejected_path = args.out.with_name(f"{args.out.stem}.rejected{args.out.suffix}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_table(result.golden, args.out)
    write_table(result.rejected, rejected_path)
    for rejection in result.rejected_documents:
        print(f"document {rejection.path} skipped: {rejection.reason}", file=sys.stderr)
    print(result.plan.to_markdown(index=False))
    print(f"{len(result.golden)} verified items from {result.n_chunks} chunks written to {args.out}; "
          f"{len(result.rejected)} rejected (with reasons) in {rejected_path}")
    return 0 if len(result.golden) else 1


def _cli_judge(args):
    embedder = Embedder(settings.warehouse_root() / "embedding_cache.sqlite")
    if args.judge == "offline":
        return OfflineJudge(embedder), embedder
    return build_llm_judge(_llm_settings(args), args.mode, args.cache), embedder


def _llm_settings(args) -> LLMSettings:
    return LLMSettings(
        base_url=args.base_url, model=args.model, api_key=args.api_key,
        response_format=args.response_format, concurrency=args.concurrency,
        timeout_s=args.timeout_s, max_retries=args.max_retries,
    )


def _score_with_progress(items, judge, embedder, metrics, k, batch_size: int = 32):
    """Scored in batches so a long run shows progress; each batch keeps the judge's concurrency."""
    results = []
    # A terminal always gets the bar; a log only when there is more than one batch to follow.
    quiet = len(items) < batch_size and not sys.stderr.isatty()
    with tqdm(total=len(items), unit="row", file=sys.stderr, disable=quiet) as progress:
        for start in range(0, len(items), batch_size):
            batch = [item for _, item in items[start : start + batch_size]]
            batch_results, _ = score_items(batch, judge, embedder, metrics, k)
            results += batch_results
            progress.update(len(batch))
    return results


def _print_failed_checks(result) -> set[str]:
    """A blocking check stops the run; say which checks failed and why. Returns their names."""
    failed = set()
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            failed.add(evaluation.asset_check_key.name)
            print(f"check {evaluation.asset_check_key.name} on {evaluation.asset_key.to_user_string()} failed:", file=sys.stderr)
            for name in ("failures", "failing_metrics"):
                if name in evaluation.metadata:
                    print(evaluation.metadata[name].value, file=sys.stderr)
    return failed


def _is_check_step(step_key: str, check_names: set[str]) -> bool:
    return any(step_key == name or step_key.endswith(f"_{name}") for name in check_names)


def _root_cause(error) -> str:
    """The error our code raised, not Dagster's wrappers around it. Its own causes are left out: our
    errors already say what matters (a JudgeUnavailable names the URL, the openai error below it does not)."""
    while error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    return f"{error.cls_name}: {error.message.strip()}"


def _print_summary(args, run_id: str, elapsed: float) -> None:
    warehouse = Warehouse(settings.warehouse_root())
    folder = warehouse.partition_dir(args.tenant, args.version)
    print(f"run {run_id} ({args.job}) finished in {elapsed:.1f} s")
    audit = warehouse.find_audit_dir(args.tenant, args.version, run_id)
    if audit is not None and (audit / "regression_report.md").exists():
        print()
        print((audit / "regression_report.md").read_text(encoding="utf-8"))
    print(f"tables for {args.tenant}/{args.version}: {folder}")
    for path in sorted(folder.glob("*.parquet")):
        print(f"  {path.name}")
    if audit is not None:
        print(f"audit of commit {args.commit} (run {run_id}): {audit}")
        for path in sorted(audit.glob("*.parquet")):
            print(f"  {path.name}")


if __name__ == "__main__":
    sys.exit(main())
