"""The nightly re-synthesis: a tenant whose documents changed since its latest version gets a new one.

It backs up the new-documents sensor (stopped, or missed changes while down). Both record what they
made in the warehouse fingerprint record, so neither makes a second version of the same documents.
"""

from datetime import datetime, timezone
from pathlib import Path

from dagster import DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.automation.jobs import synthesis_job
from rag_eval_pipeline.automation.queues import run_tags
from rag_eval_pipeline.partitions import register_partition


def nightly_requests(instance, documents_root: Path, warehouse_root: Path, now) -> tuple[list, list[str]]:
    """RunRequests for the tenants whose documents changed, and why each other tenant was left alone."""
    run_requests, reasons = [], []
    scan = inbox.scan_root(documents_root)
    reasons += [f"skipped {name!r}: {why}" for name, why in scan.skipped.items() if why != "hidden"]
    for tenant, listing in scan.tenants.items():
        if not listing:
            reasons.append(f"{tenant}: no documents yet")
            continue
        # At 02:00 nobody should be copying files; the sensor, not the schedule, waits for them to settle.
        current = inbox.fingerprint(documents_root / tenant, listing)
        recorded = inbox.read_fingerprints(warehouse_root, tenant)
        latest = inbox.latest_recorded(recorded)
        if latest and recorded[latest] == current:
            reasons.append(f"{tenant}: documents unchanged since {latest}")
            continue
        version = inbox.version_name(now, current)
        # Schedules cannot return AddDynamicPartitionsRequest: register before the run is resolved.
        key = register_partition(instance, tenant, version)
        inbox.record_fingerprint(warehouse_root, tenant, version, current)
        run_requests.append(
            RunRequest(
                run_key=f"{tenant}:{current}",
                partition_key=key,
                tags={"rag_eval/documents_fingerprint": current, **run_tags(tenant)},
            )
        )
    return run_requests, reasons


def build_nightly_resynthesis_schedule(
    documents_root: Path | None = None,
    warehouse_root: Path | None = None,
    name: str = "nightly_resynthesis_schedule",
):
    @schedule(
        name=name,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        job=synthesis_job,
        default_status=DefaultScheduleStatus.STOPPED,
        description="Every night at 02:00 UTC, a new dataset version for each tenant whose documents changed.",
    )
    def _nightly(context: ScheduleEvaluationContext):
        current = settings.load()
        root, warehouse = Path(documents_root or current.documents_root), Path(warehouse_root or current.warehouse_root)
        if not root.is_dir():
            return SkipReason(f"documents root {root} does not exist (set RAG_EVAL_DOCUMENTS_ROOT)")
        now = context.scheduled_execution_time or datetime.now(timezone.utc)
        run_requests, reasons = nightly_requests(context.instance, root, warehouse, now)
        for reason in reasons:
            context.log.info(reason)
        return run_requests or SkipReason("; ".join(reasons) or "no tenant folders")

    return _nightly


nightly_resynthesis_schedule = build_nightly_resynthesis_schedule()

SCHEDULES = [nightly_resynthesis_schedule]
