"""`rag-eval register|run|demo|gate`: tenants and versions, and the lineage jobs run for them.

Exit codes of run, demo and gate: 0 done (the gate: the candidate passes), 1 blocked (a check failed;
the gate: a regression), 2 error (bad input, a failed run; the gate: it cannot decide, because a metric
was measured on too few items or the golden-set version has no baseline on this branch).
"""

from __future__ import annotations

from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import EXIT_BLOCKED, EXIT_ERROR, EXIT_OK, BadInput
from rag_eval_pipeline.cli.options import partition_options, results_store, settings, stores
from rag_eval_pipeline.core.defaults import DEFAULT_COMMIT, DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE

DEMO_TENANT, DEMO_VERSION = "demo", "v1"
JOBS = ("full_pipeline", "synthesis", "audit")  # the lineage jobs of the code location


def _instance():
    from rag_eval_pipeline.instance import local_instance

    return local_instance(settings().dagster_home)


def _warehouse():
    return results_store()


def _commit(commit: str, option: str) -> str:
    """Checked before any work: a bad commit must not cost a synthesis or an audit."""
    from rag_eval_pipeline.core.names import validate_commit

    try:
        return validate_commit(commit)
    except ValueError as error:
        raise BadInput(f"{option}: {error}") from None


def _tolerance(context, parameter, value: float) -> float:
    if not 0 <= value <= 1:  # a NaN fails this too: it would let every drop pass
        raise click.BadParameter(f"must be between 0 and 1 (a drop of a mean score), got {value}")
    return value


def _share(context, parameter, value: float) -> float:
    if not 0 <= value <= 1:  # a NaN fails this too
        raise click.BadParameter(f"must be between 0 and 1 (a share of the items), got {value}")
    return value


def min_coverage_option(command):
    return click.option(
        "--min-coverage",
        type=float,
        default=DEFAULT_MIN_COVERAGE,
        show_default=True,
        callback=_share,
        help="least share of a metric's items that must be measured, on the "
        "candidate's side and the baseline's, to decide on it (and to become a baseline)",
    )(command)


def candidate_options(command):
    command = click.option("--promote-baseline", is_flag=True, help="make this candidate the baseline")(command)
    command = click.option("--commit", default=DEFAULT_COMMIT, show_default=True, help="the candidate's commit")(
        command
    )
    return click.option(
        "--candidate", default="reference", show_default=True, help="'reference', 'module:function' or outputs .jsonl"
    )(command)


@click.command(help="register a tenant and a dataset version")
@partition_options
def register(tenant: str, version: str) -> int:
    from rag_eval_pipeline.partitions import register_partition

    key = register_partition(_instance(), tenant, version)
    click.echo(f"registered tenant {tenant!r}, dataset version {version!r} ({key})")
    return EXIT_OK


@click.command(help="materialize a job for a registered (tenant, version)")
@partition_options
@click.option("--job", type=click.Choice(JOBS), default="full_pipeline", show_default=True)
@candidate_options
def run(tenant: str, version: str, job: str, candidate: str, commit: str, promote_baseline: bool) -> int:
    from rag_eval_pipeline.partitions import require_registered

    instance = _instance()
    key = require_registered(instance, tenant, version)
    return _run_job(instance, key, tenant, version, job, candidate, commit, promote_baseline).status


@click.command(help="register the demo tenant and run the whole lineage for it")
@click.option(
    "--version",
    default=DEMO_VERSION,
    show_default=True,
    help="dataset version; a new one re-synthesizes the (immutable) golden set",
)
@candidate_options
def demo(version: str, candidate: str, commit: str, promote_baseline: bool) -> int:
    from rag_eval_pipeline.partitions import register_partition

    instance = _instance()
    key = register_partition(instance, DEMO_TENANT, version)
    outcome = _run_job(instance, key, DEMO_TENANT, version, "full_pipeline", candidate, commit, promote_baseline)
    if outcome.status != EXIT_ERROR:
        _print_abstentions(DEMO_TENANT, version, outcome.run_id)
    if outcome.status == EXIT_OK:
        click.echo("Open the lineage in the Dagster UI:  make ui  (then http://127.0.0.1:3000)")
    return outcome.status


def _print_abstentions(tenant: str, version: str, run_id: str) -> None:
    """Per judge, the items it declined to score and why: unmeasured, so they count against coverage."""
    from rag_eval_pipeline.core.judging.results import is_abstention

    scores = _warehouse().read_audit_table(tenant, version, run_id, "metric_scores")
    if scores is None or scores.empty:
        return
    for judge, rows in scores.groupby("judge"):
        declined = rows[rows["reason"].fillna("").astype(str).map(is_abstention)]
        click.echo(
            f"judge {judge} abstained on {declined['qa_id'].nunique()} of {rows['qa_id'].nunique()} items"
            + ("" if declined.empty else ":")
        )
        for reason, count in declined["reason"].value_counts().items():
            click.echo(f"  {reason} ({count} item-metric{'s' if count > 1 else ''})")


def _run_job(instance, key, tenant, version, job, candidate, commit, promote_baseline):
    from rag_eval_pipeline.cli.launch import launch
    from rag_eval_pipeline.evaluation.candidates import CandidateSpec
    from rag_eval_pipeline.evaluation.submissions import submitted
    from rag_eval_pipeline.reporting.assets import ReportConfig

    commit = _commit(commit, "--commit")
    spec = CandidateSpec.parse(candidate)
    if job != "synthesis":  # an outputs file goes to the results store; the run's config names it
        spec = submitted(results_store(), tenant, version, commit, spec)
    # The operator's own runs: the first audit of a version becomes its baseline, as on the followed branch.
    report = ReportConfig(promote_to_baseline=promote_baseline, first_audit_is_baseline=True)
    outcome = launch(instance, job, key, commit, spec, report)
    _print_outcome(outcome, tenant, version, job, commit)
    return outcome


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
    callback=_tolerance,
    help="largest allowed drop of a mean, 0 to 1",
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
@click.option(
    "--dry-run",
    is_flag=True,
    help="print the judge calls and approximate tokens the audit would take; no run, nothing sent or written",
)
def gate(
    tenant: str,
    commit: str,
    entry: str | None,
    outputs: str | None,
    version: str | None,
    baseline: str | None,
    tolerance: float,
    min_coverage: float,
    branch: str,
    main_branch: str,
    junit: Path | None,
    rescore_baseline: bool,
    decide_on: str,
    dry_run: bool,
) -> int:
    if entry and outputs:  # checked before the imports below: they take seconds
        raise click.UsageError("--entry and --outputs name two candidates: give one")
    commit = _commit(commit, "--candidate")
    if dry_run:
        return _gate_dry_run(tenant, version, outputs, baseline)
    if settings().service.remote:
        return _gate_through_service(
            tenant,
            commit,
            entry,
            outputs,
            junit,
            version=version,
            baseline=baseline,
            tolerance=tolerance,
            min_coverage=min_coverage,
            branch=branch,
            main_branch=main_branch,
            rescore_baseline=rescore_baseline,
            decide_on=decide_on,
        )
    outputs_spec = _outputs_file(outputs) if outputs else None

    from rag_eval_pipeline.cli.launch import launch
    from rag_eval_pipeline.core.files import check_writable
    from rag_eval_pipeline.evaluation.candidates import REFERENCE_SPEC, CandidateSpec
    from rag_eval_pipeline.evaluation.submissions import submitted
    from rag_eval_pipeline.partitions import require_registered
    from rag_eval_pipeline.reporting.assets import ReportConfig

    if junit:
        check_writable(junit)  # before the audit, not after it
    spec = CandidateSpec.entry(entry) if entry else outputs_spec or REFERENCE_SPEC
    instance, opened = _instance(), stores()
    warehouse = opened.results
    version = _gated_version(warehouse, tenant, version)
    key = require_registered(instance, tenant, version)
    _check_gate_inputs(opened, tenant, version, baseline)
    if decide_on == "ppi":
        _require_labels(warehouse, tenant)
    spec = submitted(warehouse, tenant, version, commit, spec)  # outputs go to the store; the run names them
    report = ReportConfig(
        tolerance=tolerance,
        min_coverage=min_coverage,
        baseline_commit=baseline or "",
        branch=branch,
        main_branch=main_branch,
        rescore_baseline=rescore_baseline,
        decide_on="ppi" if decide_on == "ppi" else "judge",  # click's Choice checked it
    )
    outcome = launch(instance, "audit", key, commit, spec, report)
    _print_outcome(outcome, tenant, version, "audit", commit)
    if outcome.status == EXIT_ERROR:  # a blocked run still wrote its report: the verdict decides
        return EXIT_ERROR
    return _print_verdict(warehouse, tenant, version, commit, outcome.run_id, junit)


def _require_labels(store, tenant: str) -> None:
    """--decide-on ppi without any label: refused before the audit (the run checks the judge's own labels)."""
    from rag_eval_pipeline.evaluation.labels import read_labels

    if read_labels(store, tenant).empty:
        raise BadInput(
            f"--decide-on ppi needs human labels of tenant {tenant}, and it has none: label audited items "
            f"(`rag-eval review export --audit RUN`, then `rag-eval review import`) or give a labels file "
            f"(`rag-eval calibrate --tenant {tenant} --labels FILE`)"
        )


def _gate_through_service(tenant: str, commit: str, entry: str | None, outputs: str | None, junit, **options) -> int:
    """The gate as the service runs it (RAG_EVAL_SERVER and RAG_EVAL_TOKEN are set): same output, same exit."""
    from rag_eval_pipeline.cli import remote

    if entry:
        raise BadInput(
            f"--entry {entry} would run code on the gate service, not this checkout's: compute the candidate's "
            "outputs here (`rag-eval questions`) and pass --outputs FILE.jsonl"
        )
    return remote.gate(tenant, commit, outputs, junit, **options)


def _gate_dry_run(tenant: str, version: str | None, outputs: str | None, baseline: str | None) -> int:
    """The judge calls the audit would make, from the golden set, the outputs (when given) and the call
    cache: no Dagster run, no call, nothing written."""
    from dataclasses import replace

    from rag_eval_pipeline.cli.files import judge_plan
    from rag_eval_pipeline.cli.options import JudgeOptions
    from rag_eval_pipeline.core.defaults import ALL_METRICS
    from rag_eval_pipeline.core.judging.llm_judge import stand_in_item

    current = settings()
    if current.service.remote:
        raise BadInput("--dry-run reads the results store, which the gate service keeps: run it where the service runs")
    opened = stores()
    version = _gated_version(opened.results, tenant, version)
    _check_gate_inputs(opened, tenant, version, baseline)
    golden = opened.results.read(tenant, version, "golden_set").to_dict("records")
    judge = JudgeOptions.from_settings(current.judge)
    cache_tenant = None if current.production.cache_shared_across_tenants else tenant
    if outputs:
        items = _answered_items(golden, outputs)
        click.echo(
            f"dry run of the audit of {tenant}/{version}: {len(items)} of {len(golden)} golden items answered in {outputs}"
        )
    else:  # the candidate runs during the audit: its answers and contexts, and so the cache keys, are unknown
        items = [stand_in_item(g["qa_id"], g["question"], g["ground_truth"]) for g in golden]
        judge = replace(judge, cache="")
        click.echo(
            f"dry run of the audit of {tenant}/{version}: {len(items)} golden items; their answers and retrieved "
            "contexts are unknown before the candidate runs, so the calls are counted per golden item, the prompt "
            "tokens exclude the answers and contexts, and the call cache is not consulted"
        )
    click.echo(judge_plan(items, ALL_METRICS, judge, cache_tenant))
    return EXIT_OK


def _answered_items(golden: list[dict], outputs: str) -> list:
    """The golden items the outputs file answers, as the audit judges them (failed outputs are not judged)."""
    from rag_eval_pipeline.core.judging.metrics import EvalItem
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


def _print_verdict(warehouse, tenant: str, version: str, commit: str, run_id: str, junit: Path | None) -> int:
    """The exit status from this run's own stored report, never another audit's (several gates of a tenant may
    run at once), and never without one: a gate that wrote no verdict did not pass."""
    from rag_eval_pipeline.reporting.compare import BLOCKS, PASSES, decision
    from rag_eval_pipeline.reporting.junit import write_junit
    from rag_eval_pipeline.reporting.report import MARKDOWN_FILE

    report = warehouse.read_audit_table(tenant, version, run_id, "regression_report")
    if report is None or report.empty:
        raise BadInput(f"run {run_id} wrote no regression report for {tenant}/{version}: no verdict, so no pass")
    verdict = str(report["verdict_overall"].iloc[0])
    failing = report.loc[report["verdict"] == "regressed", "metric"].tolist()
    unmeasured = report.loc[report["verdict"] == "unmeasured"]
    undecided = report.loc[report["verdict"] == "undecided"]  # --decide-on ppi: an interval straddles a tolerance
    if junit:
        click.echo(f"JUnit XML: {write_junit(report, f'rag-eval gate {tenant}/{version}', junit)}")
    click.echo(
        f"gate: {verdict.upper()} for commit {commit} on {tenant}/{version}"
        + (f"; regressed: {', '.join(failing)}" if failing else "")
    )
    for metric, note in zip(unmeasured["metric"], unmeasured["note"]):
        click.echo(f"unmeasured {metric}: {note}")
    for metric, note in zip(undecided["metric"], undecided["note"]):
        click.echo(f"undecided {metric}: {note}")
    click.echo(f"baseline: {report['baseline_commit'].iloc[0]}")
    if "re-scored" in report["baseline_source"].iloc[0]:
        click.echo(f"note: {report['baseline_source'].iloc[0].split('; ', 1)[1]}")
    if report["promoted_to_baseline"].iloc[0]:
        click.echo(f"{commit} is now the baseline: {report['promoted_to_baseline'].iloc[0]}")
    click.echo(f"report: {warehouse.report_location(tenant, version, commit, run_id) / MARKDOWN_FILE}")
    outcome = decision(verdict)
    if outcome == PASSES:
        return EXIT_OK
    if outcome == BLOCKS:
        return EXIT_BLOCKED
    why = f"{', '.join(unmeasured['metric'])} measured on too few items (see above)" if len(unmeasured) else verdict
    if len(undecided) and not len(unmeasured):
        why = f"the PPI intervals of {', '.join(undecided['metric'])} straddle their tolerance (see above)"
    click.echo(f"error: the gate cannot decide on commit {commit} ({tenant}/{version}): {why}", err=True)
    return EXIT_ERROR


def _print_outcome(outcome, tenant: str, version: str, job: str, commit: str) -> None:
    """The run's tables (done), or the checks that failed and then its tables (blocked) or its errors."""
    if outcome.status == EXIT_OK:
        _print_tables(outcome, tenant, version, job, commit)
        return
    for failure in outcome.failed_checks:
        click.echo(f"check {failure.check} on {failure.asset} failed:", err=True)
        for details in failure.details:
            click.echo(details, err=True)
    if outcome.status == EXIT_ERROR:
        for line in outcome.errors:
            click.echo(line, err=True)
        click.echo(f"run {outcome.run_id} failed after {outcome.elapsed_s:.1f} s", err=True)
        return
    _print_tables(outcome, tenant, version, job, commit)
    click.echo(f"run {outcome.run_id} blocked by {', '.join(outcome.blocked_by)}", err=True)


def _print_tables(outcome, tenant: str, version: str, job: str, commit: str) -> None:
    """The run's report, read back from the store, and where the store keeps the tables."""
    store = _warehouse()
    click.echo(f"run {outcome.run_id} ({job}) finished in {outcome.elapsed_s:.1f} s")
    report = store.read_report(tenant, version, outcome.run_id)
    if report is not None:
        click.echo()
        click.echo(report.markdown)
    for line in store.locations(tenant, version, outcome.run_id):
        click.echo(line)
