"""`rag-eval prune`: delete a tenant's audits, submitted outputs and Dagster runs older than its retention.

Removed: the audit tables and reports of each run (results store), the submitted outputs (those of runs
that failed or never ran too), and the Dagster runs (their event logs), all older than the tenant's retention
(RAG_EVAL_RETENTION_DAYS_BY_TENANT, else RAG_EVAL_RETENTION_DAYS, else 90 days) or `--older-than-days`.
Kept, whatever their age: every audit and run of a commit that is or was a baseline, a published golden
set, its manifest and the run that published it, a version's own tables, and everything of a run still
queued or in progress. The stores are pruned under the tenant's promotion lock, so no commit becomes a
baseline while its audit is being deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import click

from rag_eval_pipeline.cli.errors import EXIT_OK, BadInput
from rag_eval_pipeline.cli.options import settings, stores

if TYPE_CHECKING:
    from dagster import DagsterInstance, DagsterRun

    from rag_eval_pipeline.stores import Stores
    from rag_eval_pipeline.stores.protocols import Pruned

DAGSTER_RUNS = "Dagster runs"


def _valid_tenant(context, parameter, value: str) -> str:
    from rag_eval_pipeline.core.names import PartitionNameError, validate_name

    try:
        return validate_name("tenant", value)
    except PartitionNameError as error:
        raise click.BadParameter(str(error)) from None


@click.command(help="delete a tenant's audits, submitted outputs and Dagster runs older than its retention")
@click.option("--tenant", required=True, callback=_valid_tenant)
@click.option(
    "--older-than-days",
    type=click.IntRange(min=1),
    help="retention in days (default: the tenant's in RAG_EVAL_RETENTION_DAYS_BY_TENANT, else RAG_EVAL_RETENTION_DAYS)",
)
@click.option("--dry-run", is_flag=True, help="print what would be removed; remove nothing")
def prune(tenant: str, older_than_days: int | None, dry_run: bool) -> int:
    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.partitions import TENANTS

    instance = local_instance(settings().dagster_home)
    if not instance.has_dynamic_partition(TENANTS, tenant):
        known = ", ".join(sorted(instance.get_dynamic_partitions(TENANTS))) or "none"
        raise BadInput(f"unknown tenant {tenant!r} (registered: {known}): nothing to prune")
    days = older_than_days or settings().production.retention_for(tenant)
    older_than = datetime.now(timezone.utc) - timedelta(days=days)
    for pruned in prune_tenant(instance, stores(), tenant, older_than, dry_run):
        verb = "would remove" if dry_run else "removed"
        click.echo(f"{verb} {pruned.count} {pruned.kind} of {tenant} older than {days} days ({pruned.bytes:,} bytes)")
    return EXIT_OK


def prune_tenant(
    instance: DagsterInstance, opened: Stores, tenant: str, older_than: datetime, dry_run: bool = False
) -> list[Pruned]:
    """Delete (dry_run: only measure) what of tenant is older than older_than, as the module docstring says;
    what was removed, by kind: audits, submitted outputs, Dagster runs."""
    from rag_eval_pipeline.stores.protocols import Pruned

    active = _active_runs(instance, tenant)
    keep = {run.run_id for run in active} | set(_submissions_of(active))
    # The promotion lock only while the baselines are read and the runs chosen: a gate waits for it to promote.
    with opened.baselines.locked(tenant):  # reentrant: the store's prune takes it too
        pruned = opened.baselines.prune(tenant, older_than, keep, dry_run)
        baselines = {promotion.commit for promotion in opened.baselines.history(tenant)}
        kept = _publishing_runs(opened, tenant)
        old = [run for run in _finished_runs(instance, tenant, older_than) if _removable(run, baselines, kept)]
    size = sum(_logged_bytes(instance, run.run_id) for run in old)
    if not dry_run:
        for run in old:
            instance.delete_run(run.run_id)
    return [*pruned, Pruned(DAGSTER_RUNS, len(old), size)]


def _active_runs(instance: DagsterInstance, tenant: str) -> list[DagsterRun]:
    """The tenant's runs not finished: queued, starting, in progress or canceling."""
    from dagster import DagsterRunStatus, RunsFilter
    from dagster._core.storage.dagster_run import FINISHED_STATUSES

    from rag_eval_pipeline.automation.run_health import TENANT_TAG

    unfinished = [status for status in DagsterRunStatus if status not in FINISHED_STATUSES]
    return list(instance.get_runs(RunsFilter(tags={TENANT_TAG: tenant}, statuses=unfinished)))


def _finished_runs(instance: DagsterInstance, tenant: str, older_than: datetime) -> list[DagsterRun]:
    from dagster import RunsFilter
    from dagster._core.storage.dagster_run import FINISHED_STATUSES

    from rag_eval_pipeline.automation.run_health import TENANT_TAG

    filters = RunsFilter(tags={TENANT_TAG: tenant}, statuses=list(FINISHED_STATUSES), created_before=older_than)
    return [record.dagster_run for record in instance.get_run_records(filters)]


def _submissions_of(runs: Iterable[DagsterRun]) -> list[str]:
    """The submission ids the runs' configs name: their outputs must outlive them."""
    from rag_eval_pipeline.evaluation.candidates import CandidateError, CandidateSpec

    found = []
    for run in runs:
        try:
            spec = CandidateSpec.parse(_config_value(run.run_config, "ops", "candidate_outputs", "config", "candidate"))
        except CandidateError:
            continue
        if spec.kind == "submitted_outputs":
            found.append(spec.value)
    return found


def _config_value(config: object, *path: str) -> str:
    """The text at path in a run's config; '' where it has none."""
    for name in path:
        config = config.get(name) if isinstance(config, Mapping) else None
    return config if isinstance(config, str) else ""


def _publishing_runs(opened: Stores, tenant: str) -> set[str]:
    """The runs that wrote the tenant's published golden sets (their lineage): their event logs stay, so the
    golden set keeps its materialization in Dagster."""
    from rag_eval_pipeline.stores.version_tables import lineage_of

    runs = set()
    for version in opened.results.manifest_texts(tenant):
        lineage = lineage_of(opened.results.read(tenant, version, "golden_set"))
        if lineage is not None:
            runs.add(lineage.run_id)
    return runs


def _removable(run: DagsterRun, baselines: set[str], kept: set[str]) -> bool:
    from rag_eval_pipeline.core.names import COMMIT_TAG

    return run.tags.get(COMMIT_TAG) not in baselines and run.run_id not in kept


def _logged_bytes(instance: DagsterInstance, run_id: str) -> int:
    """The size of the run's event log as Dagster serializes it."""
    from dagster._serdes import serialize_value

    return sum(len(serialize_value(entry).encode("utf-8")) for entry in instance.all_logs(run_id))
