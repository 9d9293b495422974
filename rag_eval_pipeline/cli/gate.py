"""`rag-eval gate`: audit a candidate commit against the tenant's baseline; exit 0 pass, 1 regression, 2 error.

`run_gate` is the gate itself, with its settings given rather than read from the command line, so that the
Python API's `gate()` runs the very same code; the command prints what it returns. The exit status is the
verdict's (reporting/verdict.py): 2 when the gate cannot decide (a metric measured on too few items, no
baseline off the followed branch, nothing scored) or on an error, never read as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rag_eval_pipeline.cli.errors import EXIT_ERROR, BadInput
from rag_eval_pipeline.cli.lineage import checked_commit, min_coverage_option, print_outcome, tolerance_in_range
from rag_eval_pipeline.cli.options import checked_metrics, metrics_option, settings
from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE

if TYPE_CHECKING:
    from rag_eval_pipeline.cli.launch import Outcome
    from rag_eval_pipeline.reporting.verdict import GateVerdict


@dataclass(frozen=True)
class GateRequest:
    """What to gate: the candidate (its commit, and its outputs, its entry point or the reference), and how."""

    tenant: str
    commit: str
    entry: str | None = None
    outputs: str | None = None
    version: str | None = None
    baseline: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    min_coverage: float = DEFAULT_MIN_COVERAGE
    branch: str = ""
    main_branch: str = "main"
    rescore_baseline: bool = True
    decide_on: str = "judge"
    metrics: tuple[str, ...] | None = None  # None: RAG_EVAL_METRICS, else every built-in metric
    junit: Path | None = None


@dataclass(frozen=True)
class GateRun:
    """The audit's Dagster run and, unless it failed before writing one, the verdict of its report."""

    outcome: Outcome
    version: str
    verdict: GateVerdict | None = None
    junit_path: Path | None = None


@click.command(help="audit a candidate commit against the tenant's baseline: exit 0 pass, 1 regression, 2 error")
@click.option("--tenant", required=True)
@click.option("--candidate", "commit", required=True, metavar="COMMIT", help="the candidate's commit sha")
@click.option("--entry", help="'module:function' of the candidate pipeline (default: the reference candidate)")
@click.option("--outputs", help="a .jsonl of precomputed outputs")
@click.option("--version", help="golden-set version (default: the tenant's latest published one)")
@click.option("--baseline", metavar="COMMIT", help="an audited commit to compare with (default: the current baseline)")
@click.option(
    "--tolerance",
    type=float,
    default=DEFAULT_TOLERANCE,
    show_default=True,
    callback=tolerance_in_range,
    help="largest allowed drop of a mean, 0 to 1 (a metric may declare its own)",
)
@min_coverage_option
@click.option(
    "--branch", default="", help="the candidate's branch: only a pass on the main branch sets or moves the baseline"
)
@click.option(
    "--main-branch",
    default="main",
    show_default=True,
    help="the followed branch, whose passing candidates become the baseline ('' follows none: "
    "the gate never moves the baseline)",
)
@click.option("--junit", type=click.Path(path_type=Path), help="also write the verdict per metric as JUnit XML")
@click.option(
    "--no-rescore-baseline",
    "rescore_baseline",
    flag_value=False,
    default=True,
    help="exit 2 when the baseline was scored by another judge, k or metric set, instead of "
    "re-scoring its archived outputs with the current judge",
)
@click.option(
    "--decide-on",
    type=click.Choice(["judge", "ppi"]),
    default="judge",
    show_default=True,
    help="decide judged metrics on the judge's own deltas, or on prediction-powered intervals corrected by "
    "the tenant's labels (needs `rag-eval calibrate --tenant` with this judge; exit 2 without labels)",
)
@metrics_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="print the judge calls and approximate tokens the audit would take; no run, nothing sent or written",
)
@click.pass_context
def gate(context: click.Context, dry_run: bool, metrics: str | None, **options) -> int:
    request = GateRequest(**options)
    if request.entry and request.outputs:  # checked before the imports below: they take seconds
        raise click.UsageError("--entry and --outputs name two candidates: give one")
    request = replace(request, commit=checked_commit(request.commit, "--candidate"))
    if settings().service.remote:
        if dry_run:
            raise BadInput(
                "--dry-run reads the results store, which the gate service keeps: run it where the service runs"
            )
        if context.get_parameter_source("metrics") == click.core.ParameterSource.COMMANDLINE:
            raise BadInput("--metrics: the gate service scores the metrics its operator set (RAG_EVAL_METRICS)")
        if settings().metrics:
            click.echo(
                "note: RAG_EVAL_METRICS is not used here: the gate service scores the metrics its operator set",
                err=True,
            )
        return _gate_through_service(request)
    request = replace(request, metrics=checked_metrics(metrics))
    if dry_run:
        return _gate_dry_run(request)
    done = run_gate(settings(), request)
    print_outcome(done.outcome, request.tenant, done.version, "audit", request.commit)
    if done.verdict is None:
        return EXIT_ERROR
    if done.junit_path:
        click.echo(f"JUnit XML: {done.junit_path}")
    for line in done.verdict.lines():
        click.echo(line)
    if error := done.verdict.error_line():
        click.echo(f"error: {error}", err=True)
    return done.verdict.exit_code


def run_gate(current, request: GateRequest) -> GateRun:
    """Audit the candidate and decide: BadInput (one line) for what cannot work, checked before the audit."""
    from rag_eval_pipeline.cli.launch import launch
    from rag_eval_pipeline.core.files import check_writable
    from rag_eval_pipeline.evaluation.candidates import REFERENCE_SPEC, CandidateSpec
    from rag_eval_pipeline.evaluation.submissions import submitted
    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.partitions import require_registered
    from rag_eval_pipeline.reporting.assets import ReportConfig
    from rag_eval_pipeline.stores import open_stores

    if request.entry and request.outputs:
        raise BadInput("--entry and --outputs name two candidates: give one")
    outputs_spec = _outputs_file(request.outputs) if request.outputs else None
    if request.junit:
        check_writable(request.junit)  # before the audit, not after it
    spec = CandidateSpec.entry(request.entry) if request.entry else outputs_spec or REFERENCE_SPEC
    instance = local_instance(current.dagster_home)
    opened = open_stores(current.warehouse_root, current.production.database_url)
    warehouse = opened.results
    version = _gated_version(warehouse, request.tenant, request.version)
    key = require_registered(instance, request.tenant, version)
    _check_gate_inputs(opened, request.tenant, version, request.baseline)
    if request.decide_on == "ppi":
        _require_labels(warehouse, request.tenant)
    spec = submitted(warehouse, request.tenant, version, request.commit, spec)  # the run names the stored outputs
    report = ReportConfig(
        tolerance=request.tolerance,
        min_coverage=request.min_coverage,
        baseline_commit=request.baseline or "",
        branch=request.branch,
        main_branch=request.main_branch,
        rescore_baseline=request.rescore_baseline,
        decide_on="ppi" if request.decide_on == "ppi" else "judge",
    )
    outcome = launch(instance, "audit", key, request.commit, spec, report, request.metrics)
    if outcome.status == EXIT_ERROR:  # a blocked run still wrote its report: the verdict decides
        return GateRun(outcome, version)
    verdict = verdict_of_run(warehouse, request.tenant, version, request.commit, outcome.run_id)
    junit = _write_junit(verdict, request.junit) if request.junit else None
    return GateRun(outcome, version, verdict, junit)


def verdict_of_run(warehouse, tenant: str, version: str, commit: str, run_id: str) -> GateVerdict:
    """The verdict from this run's own stored report; BadInput when it wrote none (a gate without a verdict
    did not pass)."""
    from rag_eval_pipeline.reporting.report import MARKDOWN_FILE
    from rag_eval_pipeline.reporting.verdict import GateVerdict

    report = warehouse.read_audit_table(tenant, version, run_id, "regression_report")
    if report is None or report.empty:
        raise BadInput(f"run {run_id} wrote no regression report for {tenant}/{version}: no verdict, so no pass")
    where = warehouse.report_location(tenant, version, commit, run_id) / MARKDOWN_FILE
    return GateVerdict.from_report(report, tenant, version, commit, run_id, str(where))


def _write_junit(verdict: GateVerdict, path: Path) -> Path:
    from rag_eval_pipeline.reporting.junit import write_junit

    return Path(write_junit(verdict.report, f"rag-eval gate {verdict.tenant}/{verdict.version}", path))


def _require_labels(store, tenant: str) -> None:
    """--decide-on ppi without any label: refused before the audit (the run checks the judge's own labels)."""
    from rag_eval_pipeline.evaluation.labels import read_labels

    if read_labels(store, tenant).empty:
        raise BadInput(
            f"--decide-on ppi needs human labels of tenant {tenant}, and it has none: label audited items "
            f"(`rag-eval review export --audit RUN`, then `rag-eval review import`) or give a labels file "
            f"(`rag-eval calibrate --tenant {tenant} --labels FILE`)"
        )


def _gate_through_service(request: GateRequest) -> int:
    """The gate as the service runs it (RAG_EVAL_SERVER and RAG_EVAL_TOKEN are set): same output, same exit."""
    from rag_eval_pipeline.cli import remote

    if request.entry:
        raise BadInput(
            f"--entry {request.entry} would run code on the gate service, not this checkout's: compute the "
            "candidate's outputs here (`rag-eval questions`) and pass --outputs FILE.jsonl"
        )
    return remote.gate(
        request.tenant,
        request.commit,
        request.outputs,
        request.junit,
        version=request.version,
        baseline=request.baseline,
        tolerance=request.tolerance,
        min_coverage=request.min_coverage,
        branch=request.branch,
        main_branch=request.main_branch,
        rescore_baseline=request.rescore_baseline,
        decide_on=request.decide_on,
    )


def _gate_dry_run(request: GateRequest) -> int:
    """The judge calls the audit would make, from the golden set, the outputs (when given) and the call
    cache: no Dagster run, no call, nothing written."""
    from rag_eval_pipeline.cli.files import judge_plan
    from rag_eval_pipeline.cli.options import JudgeOptions, stores
    from rag_eval_pipeline.core.judging.llm_judge import stand_in_item

    current, tenant = settings(), request.tenant
    opened = stores()
    version = _gated_version(opened.results, tenant, request.version)
    _check_gate_inputs(opened, tenant, version, request.baseline)
    golden = opened.results.read(tenant, version, "golden_set").to_dict("records")
    judge = JudgeOptions.from_settings(current.judge)
    cache_tenant = None if current.production.cache_shared_across_tenants else tenant
    if request.outputs:
        items = _answered_items(golden, request.outputs)
        click.echo(
            f"dry run of the audit of {tenant}/{version}: {len(items)} of {len(golden)} golden items answered in "
            f"{request.outputs}"
        )
    else:  # the candidate runs during the audit: its answers and contexts, and so the cache keys, are unknown
        items = [stand_in_item(g["qa_id"], g["question"], g["ground_truth"]) for g in golden]
        judge = replace(judge, cache="")
        click.echo(
            f"dry run of the audit of {tenant}/{version}: {len(items)} golden items; their answers and retrieved "
            "contexts are unknown before the candidate runs, so the calls are counted per golden item, the prompt "
            "tokens exclude the answers and contexts, and the call cache is not consulted"
        )
    click.echo(judge_plan(items, request.metrics, judge, cache_tenant))
    return 0


def _answered_items(golden: list[dict], outputs: str) -> list:
    """The golden items the outputs file answers, as the audit judges them (failed outputs are not judged)."""
    from rag_eval_pipeline.core.judging.item import EvalItem
    from rag_eval_pipeline.core.judging.results import OK
    from rag_eval_pipeline.evaluation.candidates import outputs_from_text, outputs_text

    truths = {g["qa_id"]: g["ground_truth"] for g in golden}
    answered = [o for o in outputs_from_text(outputs_text(outputs), golden) if o.status == OK]
    return [EvalItem(o.qa_id, o.question, o.answer, o.contexts, truths[o.qa_id]) for o in answered]


def _outputs_file(outputs: str):
    """The --outputs candidate, its file read now: one that holds no usable record is bad input (exit 2), not
    an audit of nothing, and is refused before the instance and the run start."""
    from rag_eval_pipeline.evaluation.candidates import CandidateSpec, outputs_text

    spec = CandidateSpec("outputs_file", outputs)
    outputs_text(spec.value)  # read again when it is submitted; this read only checks
    return spec


def _gated_version(warehouse, tenant: str, version: str | None) -> str:
    from rag_eval_pipeline.synthesis.versions import latest_version

    version = version or latest_version(warehouse, tenant)
    if version is None:
        raise BadInput(f"tenant {tenant!r} has no published golden set yet: run its synthesis job first")
    return version


def _check_gate_inputs(opened, tenant: str, version: str, baseline: str | None) -> None:
    from rag_eval_pipeline.synthesis.versions import read_manifest, require_items

    warehouse = opened.results
    manifest = read_manifest(warehouse, tenant, version)
    if manifest is None:
        raise BadInput(
            f"the golden set of {tenant}/{version} is not published (its synthesis did not finish or "
            "its checks failed): nothing to gate on"
        )
    require_items(manifest)
    audited = opened.baselines.audited_commits(tenant, version)
    if baseline and baseline not in audited:
        raise BadInput(
            f"baseline commit {baseline!r} was never audited on {tenant}/{version} "
            f"(audited commits: {', '.join(audited) or 'none yet'})"
        )
