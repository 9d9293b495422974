"""Run a lineage job (in this process, or on a worker in production mode), and tell from Dagster's own
records what became of it.

- done: the run succeeded.
- blocked: a blocking asset check failed and nothing else did. Dagster 1.13 records a failed
  blocking check as a failed check evaluation plus a step failure whose error is
  DagsterAssetCheckFailedError; when every step failure of the run is of that class, every asset
  that ran finished and a check said no (a regression, a golden set that fails its suite).
- error: any other step failure (or a run that failed without one).

The terminal gets what the assets and checks log themselves (progress, warnings), one line each,
and our one-line summary of a failure; Dagster's own event lines (a step failure's stack trace, the
run failure) stay in the run's log and the UI, where `dagster` and the webserver show them.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from dagster import DagsterInstance, Definitions, Field, logger
from dagster._utils.error import SerializableErrorInfo  # pyright: ignore[reportPrivateImportUsage]

from rag_eval_pipeline.cli.errors import EXIT_BLOCKED, EXIT_ERROR, EXIT_OK, BadInput

CHECK_FAILED = "DagsterAssetCheckFailedError"  # the error class of a step whose blocking check failed
RUN_LOG_LEVEL = "INFO"  # the assets' progress messages and warnings; Dagster's DEBUG events stay in the run log


@dataclass(frozen=True)
class CheckFailure:
    check: str
    asset: str
    details: list[str]  # what the check's metadata says failed


@dataclass(frozen=True)
class Outcome:
    status: int  # EXIT_OK, EXIT_BLOCKED or EXIT_ERROR
    run_id: str
    elapsed_s: float
    failed_checks: list[CheckFailure]
    blocked_by: list[str]  # the blocking checks that failed, when status is EXIT_BLOCKED
    errors: list[str]  # 'error in <step>: <class>: <message>', when status is EXIT_ERROR


def launch(
    instance: DagsterInstance,
    job_name: str,
    partition_key: str,
    commit: str,
    candidate=None,
    report=None,
    metrics: Sequence[str] | None = None,
) -> Outcome:
    """Run job_name on one partition; its outcome. candidate (a CandidateSpec, default the reference),
    report (ReportConfig) and metrics (None: RAG_EVAL_METRICS, else every built-in) configure the audit;
    the commit is tagged on the run. The run executes in
    this process, or, when the instance hands runs to workers (production mode), on a worker: it is
    submitted to the instance's queue with its tenant's queue tags and waited for."""
    from rag_eval_pipeline.automation.submission import runs_elsewhere

    _clear_dead_runs(instance, partition_key)
    if runs_elsewhere(instance):
        return _submit_and_wait(instance, job_name, partition_key, commit, candidate, report, metrics)
    from rag_eval_pipeline.automation.run_config import lineage_run_config
    from rag_eval_pipeline.core.names import COMMIT_TAG
    from rag_eval_pipeline.definitions import build_definitions

    run_config = lineage_run_config(job_name, candidate, commit, report, log_level=RUN_LOG_LEVEL, metrics=metrics)
    # Our logger replaces Dagster's console logger for this run only: the code location is unchanged.
    definitions = Definitions.merge(build_definitions(), Definitions(loggers={"console": terminal_logger}))
    job = definitions.resolve_job_def(job_name)
    started = time.perf_counter()
    with run_span(job_name, partition_key, commit) as traced:
        result = job.execute_in_process(
            run_config=run_config,
            instance=instance,
            partition_key=partition_key,
            tags={COMMIT_TAG: commit, **traced},
            raise_on_error=False,
        )
    return classify(records_of_result(result), time.perf_counter() - started)


@contextmanager
def run_span(job_name: str, partition_key: str, commit: str):
    """The run under a span of its own in its tenant's project; yields the tags that carry it to the run's
    steps (here or on a worker). What is batched is sent at the end, within the exporter's timeout."""
    from rag_eval_pipeline.core import tracing
    from rag_eval_pipeline.partitions import split_key

    tenant, version = split_key(partition_key)
    attributes = {"rag_eval.tenant": tenant, "rag_eval.dataset_version": version, "rag_eval.commit": commit}
    try:
        with tracing.tenant_scope(tenant), tracing.span(f"{job_name} {tenant}/{version}", tracing.CHAIN, attributes):
            parent = tracing.traceparent()
            yield {tracing.TRACEPARENT_TAG: parent} if parent else {}
    finally:
        tracing.flush()


def _submit_and_wait(
    instance: DagsterInstance, job_name: str, partition_key: str, commit: str, candidate, report, metrics
) -> Outcome:
    from rag_eval_pipeline import settings
    from rag_eval_pipeline.automation import submission
    from rag_eval_pipeline.automation.queues import QUEUE_TAG, run_tags
    from rag_eval_pipeline.automation.run_config import lineage_run_config
    from rag_eval_pipeline.core.names import COMMIT_TAG
    from rag_eval_pipeline.partitions import split_key

    current = settings.load()
    _require_shared_storage(current.production, candidate)
    run_config = lineage_run_config(job_name, candidate, commit, report, log_level=None, metrics=metrics)
    run_config = run_config.to_config_dict()
    started = time.perf_counter()
    with run_span(job_name, partition_key, commit) as traced:  # the worker's steps nest under it
        tags = {COMMIT_TAG: commit, **run_tags(split_key(partition_key)[0]), **traced}
        run_id = submission.submit(instance, job_name, partition_key, run_config, tags)
        print(f"run {run_id} queued for a worker on {tags[QUEUE_TAG]}", file=sys.stderr, flush=True)
        try:
            run = submission.wait_for(instance, run_id, current.production.run_timeout_s)
        except KeyboardInterrupt:
            # A run left queued would still run later, and might promote a baseline nobody waits for.
            instance.run_coordinator.cancel_run(run_id)
            raise
        except TimeoutError:
            ending = give_up(instance, run_id, current.run_stale_after_s, tags[QUEUE_TAG])
            raise BadInput(
                f"run {run_id} did not finish within {current.production.run_timeout_s:.0f} s "
                f"(RAG_EVAL_RUN_TIMEOUT_S): {ending}"
            ) from None
    return classify(records_of_run(instance, run.run_id, submission.succeeded(run)), time.perf_counter() - started)


def give_up(instance: DagsterInstance, run_id: str, stale_after_s: float, queue: str) -> str:
    """Stop the run this command no longer waits for (left alone, it might promote a baseline nobody
    waits for), and say what became of it: only what its records show. It waits up to the stale limit, so
    a run whose worker is gone is found dead by its heartbeat before the command ends."""
    from dagster import DagsterRunStatus
    from dagster._core.storage.dagster_run import FINISHED_STATUSES

    from rag_eval_pipeline.automation.run_health import TENANT_TAG, stop_run

    run = instance.get_run_by_id(run_id)
    assert run is not None  # it was just submitted: runs are never deleted here
    ending = stop_run(instance, run_id, stale_after_s, by="rag-eval (its wait timed out)", stale_after_s=stale_after_s)
    if run.status == DagsterRunStatus.QUEUED:
        hint = f"; are workers serving {queue}?"
    elif ending.status not in FINISHED_STATUSES:
        hint = f"; `rag-eval runs clear --tenant {run.tags.get(TENANT_TAG)} --run {run_id} --force` stops it"
    else:
        hint = ""
    return f"{ending.message} (status {ending.status.value}){hint}"


def _clear_dead_runs(instance: DagsterInstance, partition_key: str) -> None:
    """Runs of the tenant whose process is gone are marked failed first, so they free its run slot."""
    from rag_eval_pipeline.automation.run_health import clear_dead
    from rag_eval_pipeline.partitions import split_key

    tenant = split_key(partition_key)[0]
    for run in clear_dead(instance, by=f"rag-eval (before a run of {tenant})", tenant=tenant):
        print(f"marked run {run.run_id} of {tenant} failed: {run.verdict.reason}", file=sys.stderr, flush=True)


def _require_shared_storage(production, candidate) -> None:
    """A run on a worker must find everything it reads and writes off this machine, and run the candidate
    this command names: refused otherwise, before anything is queued."""
    if not production.enabled:
        raise BadInput(
            "this Dagster instance hands runs to workers, but RAG_EVAL_DATABASE_URL is not set: the "
            "results would stay on the workers' disks; set the production variables (README: Production)"
        )
    missing = [
        name
        for name, value in (
            ("RAG_EVAL_OBJECT_STORE_URL", production.object_store_url),
            ("RAG_EVAL_CACHE_URL", production.cache_url),
        )
        if not value
    ]
    if missing:
        raise BadInput(
            f"runs on workers need shared storage, but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set (README: Production)"
        )
    if candidate is not None and candidate.kind == "entry_point":
        raise BadInput(
            f"--entry {candidate.value} would run the code installed on the shared workers, not this "
            "checkout's: compute the candidate's outputs here and pass --outputs FILE.jsonl"
        )


@dataclass(frozen=True)
class RunRecords:
    """What a finished run recorded, wherever it ran."""

    success: bool
    run_id: str
    check_evaluations: list  # AssetCheckEvaluation
    step_failures: list  # DagsterEvent of type STEP_FAILURE
    run_failure: SerializableErrorInfo | str | None  # why the run failed without a step failing: its error, or
    # the failure or cancel event's message when it has none (a launch that failed, a canceled run)


def _run_failure(event):
    data = getattr(event, "job_failure_data", None) if event is not None else None
    return getattr(data, "error", None)


def records_of_result(result) -> RunRecords:
    """The records of a run executed in this process."""
    failures = result.get_step_failure_events()
    # Dagster records the run's own failure only when no step failed first.
    run_failure = None if result.success or failures else _run_failure(result.get_run_failure_event())
    return RunRecords(result.success, result.run_id, result.get_asset_check_evaluations(), failures, run_failure)


def records_of_run(instance: DagsterInstance, run_id: str, success: bool) -> RunRecords:
    """A run's records, read back from the instance's event log (the run executed elsewhere)."""
    from dagster import DagsterEventType

    events = [entry.dagster_event for entry in instance.all_logs(run_id) if entry.dagster_event is not None]
    of = lambda kind: [e for e in events if e.event_type == kind]
    ended = of(DagsterEventType.RUN_FAILURE) + of(DagsterEventType.RUN_CANCELED)
    why = (_run_failure(ended[-1]) or ended[-1].message) if ended else None
    return RunRecords(
        success,
        run_id,
        [e.event_specific_data for e in of(DagsterEventType.ASSET_CHECK_EVALUATION)],
        of(DagsterEventType.STEP_FAILURE),
        why,
    )


def classify(run: RunRecords, elapsed_s: float) -> Outcome:
    """Classify a finished run from its records: the check evaluations and the step failures' error classes."""
    evaluations = [e for e in run.check_evaluations if not e.passed]
    failed_checks = [
        CheckFailure(e.asset_check_key.name, e.asset_key.to_user_string(), _details(e)) for e in evaluations
    ]
    if run.success:
        return Outcome(EXIT_OK, run.run_id, elapsed_s, failed_checks, [], [])
    failures = run.step_failures
    errors = [f for f in failures if f.step_failure_data.error.cls_name != CHECK_FAILED]
    blocking = sorted({e.asset_check_key.name for e in evaluations if e.blocking is not False})
    if failures and not errors and blocking:
        return Outcome(EXIT_BLOCKED, run.run_id, elapsed_s, failed_checks, blocking, [])
    lines = [f"error in {f.step_key}: {_root_cause(f.step_failure_data.error)}" for f in errors]
    if not failures:  # the run failed (or was canceled) before any step did
        lines.append(
            f"error: {_root_cause(run.run_failure)}"
            if isinstance(run.run_failure, SerializableErrorInfo)
            else f"error: {run.run_failure or 'the run failed before any step ran'}"
        )
    return Outcome(EXIT_ERROR, run.run_id, elapsed_s, failed_checks, [], lines)


def _details(evaluation) -> list[str]:
    return [
        str(evaluation.metadata[name].value) for name in ("failures", "failing_metrics") if name in evaluation.metadata
    ]


def _root_cause(error) -> str:
    """The error our code raised, not Dagster's wrappers around it. Its own causes are left out: our
    errors already say what matters (a LLMUnavailable names the URL, the openai error below it does not)."""
    while error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    # The recorded message starts with the (qualified) class name already: say it once.
    name, _, rest = error.message.strip().partition(": ")
    message = rest if rest and name.split(".")[-1] == error.cls_name else error.message.strip()
    return f"{error.cls_name}: {message}"


class _RunMessages(logging.Handler):
    """What the run's assets and checks log (INFO and WARNING), one line each on stderr.

    Records that carry a Dagster event (step started, step failed with its stack trace, run failed)
    and Dagster's own EXIT_ERROR lines are left out: the CLI reports a failure from the run's records.
    """

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}  # what Dagster attaches to each record it logs
        if meta.get("dagster_event") is not None or record.levelno >= logging.ERROR:
            return
        where = meta.get("step_key") or meta.get("job_name") or "run"
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        print(f"{level}{where}: {meta.get('orig_message', record.getMessage())}", file=sys.stderr, flush=True)


@logger(
    config_schema={"log_level": Field(str, is_required=False, default_value=RUN_LOG_LEVEL)},
    description="The run's own messages on stderr, without Dagster's event lines.",
)
def terminal_logger(init_context) -> logging.Logger:
    level = logging.getLevelName(init_context.logger_config["log_level"].upper())
    run_logger = logging.Logger("rag-eval", level=level)
    run_logger.addHandler(_RunMessages())
    return run_logger
