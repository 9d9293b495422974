"""Run a lineage job in this process, and tell from Dagster's own records what became of it.

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
from dataclasses import dataclass

from dagster import DagsterInstance, Definitions, Field, logger

from rag_eval_pipeline.cli.errors import BLOCKED, ERROR, OK

CHECK_FAILED = "DagsterAssetCheckFailedError"  # the error class of a step whose blocking check failed
RUN_LOG_LEVEL = "INFO"  # the assets' progress messages and warnings; Dagster's DEBUG events stay in the run log


@dataclass(frozen=True)
class CheckFailure:
    check: str
    asset: str
    details: list[str]  # what the check's metadata says failed


@dataclass(frozen=True)
class Outcome:
    status: int  # OK, BLOCKED or ERROR
    run_id: str
    elapsed_s: float
    failed_checks: list[CheckFailure]
    blocked_by: list[str]  # the blocking checks that failed, when status is BLOCKED
    errors: list[str]  # 'error in <step>: <class>: <message>', when status is ERROR


def launch(instance: DagsterInstance, job_name: str, partition_key: str, commit: str,
           candidate=None, report=None) -> Outcome:
    """Run job_name on one partition in this process; its outcome. candidate (a CandidateSpec, default the
    reference) and report (ReportSettings) configure the audit; the commit is tagged on the run."""
    from rag_eval_pipeline.automation.run_config import lineage_run_config
    from rag_eval_pipeline.core.names import COMMIT_TAG
    from rag_eval_pipeline.definitions import build_definitions

    run_config = lineage_run_config(job_name, candidate, commit, report, log_level=RUN_LOG_LEVEL)
    # Our logger replaces Dagster's console logger for this run only: the code location is unchanged.
    definitions = Definitions.merge(build_definitions(), Definitions(loggers={"console": terminal_logger}))
    job = definitions.resolve_job_def(job_name)
    started = time.perf_counter()
    result = job.execute_in_process(run_config=run_config, instance=instance, partition_key=partition_key,
                                    tags={COMMIT_TAG: commit}, raise_on_error=False)
    return outcome_of(result, time.perf_counter() - started)


def outcome_of(result, elapsed_s: float) -> Outcome:
    """Classify a finished run from its records: the check evaluations and the step failures' error classes."""
    evaluations = [e for e in result.get_asset_check_evaluations() if not e.passed]
    failed_checks = [CheckFailure(e.asset_check_key.name, e.asset_key.to_user_string(), _details(e)) for e in evaluations]
    if result.success:
        return Outcome(OK, result.run_id, elapsed_s, failed_checks, [], [])
    failures = result.get_step_failure_events()
    errors = [f for f in failures if f.step_failure_data.error.cls_name != CHECK_FAILED]
    blocking = sorted({e.asset_check_key.name for e in evaluations if e.blocking is not False})
    if failures and not errors and blocking:
        return Outcome(BLOCKED, result.run_id, elapsed_s, failed_checks, blocking, [])
    lines = [f"error in {f.step_key}: {_root_cause(f.step_failure_data.error)}" for f in errors]
    if not failures:  # the run failed before any step did
        error = result.get_run_failure_event().job_failure_data.error
        lines.append(f"error: {_root_cause(error)}" if error else "error: the run failed before any step ran")
    return Outcome(ERROR, result.run_id, elapsed_s, failed_checks, [], lines)


def _details(evaluation) -> list[str]:
    return [str(evaluation.metadata[name].value) for name in ("failures", "failing_metrics") if name in evaluation.metadata]


def _root_cause(error) -> str:
    """The error our code raised, not Dagster's wrappers around it. Its own causes are left out: our
    errors already say what matters (a JudgeUnavailable names the URL, the openai error below it does not)."""
    while error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    # The recorded message starts with the (qualified) class name already: say it once.
    name, _, rest = error.message.strip().partition(": ")
    message = rest if rest and name.split(".")[-1] == error.cls_name else error.message.strip()
    return f"{error.cls_name}: {message}"


class _RunMessages(logging.Handler):
    """What the run's assets and checks log (INFO and WARNING), one line each on stderr.

    Records that carry a Dagster event (step started, step failed with its stack trace, run failed)
    and Dagster's own ERROR lines are left out: the CLI reports a failure from the run's records.
    """

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}  # what Dagster attaches to each record it logs
        if meta.get("dagster_event") is not None or record.levelno >= logging.ERROR:
            return
        where = meta.get("step_key") or meta.get("job_name") or "run"
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        print(f"{level}{where}: {meta.get('orig_message', record.getMessage())}", file=sys.stderr, flush=True)


@logger(config_schema={"log_level": Field(str, is_required=False, default_value=RUN_LOG_LEVEL)},
        description="The run's own messages on stderr, without Dagster's event lines.")
def terminal_logger(init_context) -> logging.Logger:
    level = logging.getLevelName(init_context.logger_config["log_level"].upper())
    run_logger = logging.Logger("rag-eval", level=level)
    run_logger.addHandler(_RunMessages())
    return run_logger
