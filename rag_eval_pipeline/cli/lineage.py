"""`rag-eval register|run|demo`: tenants and versions, and the lineage jobs run for them (the gate: gate.py).

Exit codes of run and demo: 0 done, 1 blocked (a check failed), 2 error (bad input, a failed run).
"""

from __future__ import annotations

import click

from rag_eval_pipeline.cli.errors import EXIT_ERROR, EXIT_OK, BadInput
from rag_eval_pipeline.cli.options import partition_options, results_store, settings
from rag_eval_pipeline.core.defaults import DEFAULT_COMMIT, DEFAULT_MIN_COVERAGE

DEMO_TENANT, DEMO_VERSION = "demo", "v1"
JOBS = ("full_pipeline", "synthesis", "audit")  # the lineage jobs of the code location


def _instance():
    from rag_eval_pipeline.instance import local_instance

    return local_instance(settings().dagster_home)


def _warehouse():
    return results_store()


def checked_commit(commit: str, option: str) -> str:
    """Checked before any work: a bad commit must not cost a synthesis or an audit."""
    from rag_eval_pipeline.core.names import validate_commit

    try:
        return validate_commit(commit)
    except ValueError as error:
        raise BadInput(f"{option}: {error}") from None


def tolerance_in_range(context, parameter, value: float) -> float:
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

    commit = checked_commit(commit, "--commit")
    spec = CandidateSpec.parse(candidate)
    if job != "synthesis":  # an outputs file goes to the results store; the run's config names it
        spec = submitted(results_store(), tenant, version, commit, spec)
    # The operator's own runs: the first audit of a version becomes its baseline, as on the followed branch.
    report = ReportConfig(promote_to_baseline=promote_baseline, first_audit_is_baseline=True)
    outcome = launch(instance, job, key, commit, spec, report)
    print_outcome(outcome, tenant, version, job, commit)
    return outcome


def print_outcome(outcome, tenant: str, version: str, job: str, commit: str) -> None:
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
