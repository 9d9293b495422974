"""`rag-eval runs stuck|clear`: a tenant's queued and in-progress runs, and the ones whose process is gone.

A run whose process was killed stays STARTED in Dagster's records and holds its tenant's run slot;
`stuck` shows each run with what tells whether it lives (see automation/liveness.py), `clear` marks the
dead ones failed. A run that still looks alive is stopped only on request: `clear --run ID --force`.
"""

from __future__ import annotations

import time

import click

from rag_eval_pipeline.cli.errors import EXIT_OK, BadInput
from rag_eval_pipeline.cli.options import settings

FORCE_GRACE_S = 30.0  # how long `clear --force` waits for a canceled run to end before marking it failed


@click.group(help="list a tenant's runs in progress; clear those whose process is gone")
def runs() -> None:
    pass


def _tenant_option(command):
    return click.option("--tenant", required=True, callback=_valid_tenant)(command)


def _valid_tenant(context, parameter, value: str) -> str:
    from rag_eval_pipeline.core.names import PartitionNameError, validate_name

    try:
        return validate_name("tenant", value)
    except PartitionNameError as error:
        raise click.BadParameter(str(error)) from None


def _instance():
    from rag_eval_pipeline.instance import local_instance

    return local_instance(settings().dagster_home)


@runs.command(help="list the tenant's queued and in-progress runs, and whether each one's process is gone")
@_tenant_option
def stuck(tenant: str) -> int:
    from rag_eval_pipeline.automation.run_health import examine

    found = examine(_instance(), tenant)
    if not found:
        click.echo(f"no queued or in-progress runs of {tenant}")
        return EXIT_OK
    now = time.time()
    for run in found:
        click.echo(_describe(run, now))
    dead = sum(run.verdict.dead for run in found)
    if dead:
        click.echo(f"{dead} dead: `rag-eval runs clear --tenant {tenant}` marks {'it' if dead == 1 else 'them'} failed")
    return EXIT_OK


@runs.command(help="mark failed the tenant's runs whose process is gone, which frees their run slots")
@_tenant_option
@click.option("--run", "run_id", metavar="RUN_ID", help="only this run")
@click.option(
    "--force",
    is_flag=True,
    help=f"with --run: stop it even if it looks alive (cancel it, then after {FORCE_GRACE_S:g} s mark it failed)",
)
def clear(tenant: str, run_id: str | None, force: bool) -> int:
    from rag_eval_pipeline.automation.run_health import examine, mark_failed, stop_run

    if force and not run_id:
        raise click.UsageError("--force stops a run that may be alive: name it with --run")
    instance = _instance()
    by = "rag-eval runs clear" + (" --force" if force else "")
    found = examine(instance, tenant, run_ids=[run_id] if run_id else None)
    if run_id and not found:
        raise BadInput(_not_found(instance, tenant, run_id))
    if not found:
        click.echo(f"no queued or in-progress runs of {tenant}")
    for run in found:
        if run.verdict.dead:
            marked = mark_failed(instance, run.run_id, run.verdict.reason, by)
            click.echo(
                f"marked run {run.run_id} failed: {run.verdict.reason}"
                if marked
                else f"run {run.run_id} ended by itself meanwhile"
            )
        elif force:
            ending = stop_run(instance, run.run_id, FORCE_GRACE_S, by, force=True)
            click.echo(f"run {run.run_id}: {ending.message} (status {ending.status.value})")
        else:
            click.echo(
                f"left run {run.run_id} ({run.status.value}): {run.verdict.reason}"
                + ("" if run.status.value == "QUEUED" else f"; `--run {run.run_id} --force` stops it anyway")
            )
    return EXIT_OK


def _describe(run, now: float) -> str:
    """One line: id, job, status and for how long, its process, its last heartbeat, and the verdict with why."""
    executor, verdict = run.verdict.executor, run.verdict
    queued = run.status.value == "QUEUED"
    process = (
        f"pid {executor.pid} on {executor.host}" if executor else "not started" if queued else "no liveness record"
    )
    beat = f"heartbeat {verdict.heartbeat_age_s:.0f} s ago" if verdict.heartbeat_age_s is not None else "no heartbeat"
    state = "DEAD" if verdict.dead else "waiting" if queued else "alive" if executor else "unknown"
    return (
        f"{run.run_id}  {run.record.dagster_run.job_name}  {run.status.value} for {now - run.since:.0f} s  "
        f"{process}  {beat}  {state}: {verdict.reason}"
    )


def _not_found(instance, tenant: str, run_id: str) -> str:
    from rag_eval_pipeline.automation.run_health import TENANT_TAG

    run = instance.get_run_by_id(run_id)
    if run is None:
        return f"no run {run_id} in this Dagster instance ({settings().dagster_home})"
    if run.tags.get(TENANT_TAG) != tenant:
        return f"run {run_id} is not a run of {tenant} (its tenant: {run.tags.get(TENANT_TAG) or 'none'})"
    return f"run {run_id} has already ended ({run.status.value}): nothing to clear"
