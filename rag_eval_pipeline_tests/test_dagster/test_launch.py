"""How the CLI tells a run blocked by a check from a failed one, from Dagster's own records, and what
its runs print: the assets' own messages, never Dagster's stack traces."""

import pytest
from dagster import (
    AssetCheckResult,
    DagsterInstance,
    Definitions,
    asset,
    asset_check,
    define_asset_job,
    in_process_executor,
)

from rag_eval_pipeline.cli.errors import EXIT_BLOCKED, EXIT_ERROR, EXIT_OK
from rag_eval_pipeline.cli.launch import classify, records_of_result, records_of_run, terminal_logger
from rag_eval_pipeline.cli.lineage import JOBS
from rag_eval_pipeline.definitions import build_definitions

pytestmark = [pytest.mark.dagster]


@asset
def table(context):
    context.log.warning("2 rows dropped")
    context.log.info("40 rows written")
    return 1


@asset_check(asset=table, blocking=True)
def table_is_good(table):
    return AssetCheckResult(passed=False, metadata={"failures": "row 3: no question"})


@asset_check(asset=table, blocking=False)
def table_is_pretty(table):
    return AssetCheckResult(passed=False)


@asset(deps=[table])
def downstream():
    return 2


@asset
def broken():
    raise ValueError("the judge said no")


DEFS = Definitions(
    assets=[table, downstream, broken],
    asset_checks=[table_is_good, table_is_pretty],
    jobs=[
        define_asset_job("blocked", selection=["table", "downstream"]),
        define_asset_job("failing", selection=["broken"]),
        define_asset_job("fine", selection=["downstream"]),
    ],
    loggers={"console": terminal_logger},
    executor=in_process_executor,
)


def _run(job: str):
    """The outcome, classified from the run's result in process; the same as from the instance's event log
    (what the CLI reads when the run executed on a worker)."""
    instance = DagsterInstance.ephemeral()
    result = DEFS.resolve_job_def(job).execute_in_process(
        run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        instance=instance,
        raise_on_error=False,
    )
    outcome = classify(records_of_result(result), 1.0)
    assert classify(records_of_run(instance, result.run_id, result.success), 1.0) == outcome
    return outcome


def test_a_failed_blocking_check_blocks_the_run(capsys):
    outcome = _run("blocked")

    assert outcome.status == EXIT_BLOCKED
    assert outcome.blocked_by == ["table_is_good"]  # the non-blocking failure does not block
    assert {f.check: f.details for f in outcome.failed_checks} == {
        "table_is_good": ["row 3: no question"],
        "table_is_pretty": [],
    }
    err = capsys.readouterr().err
    assert "warning: table: 2 rows dropped" in err and "table: 40 rows written" in err
    assert "Stack Trace" not in err and "STEP_FAILURE" not in err and "DagsterAssetCheckFailedError" not in err


def test_an_error_in_an_asset_is_an_error_with_its_own_class(capsys):
    outcome = _run("failing")

    assert outcome.status == EXIT_ERROR and outcome.blocked_by == []
    assert outcome.errors == ["error in broken: ValueError: the judge said no"]
    assert "Stack Trace" not in capsys.readouterr().err


def test_a_run_that_succeeds_is_ok():
    assert _run("fine").status == EXIT_OK


def test_the_cli_offers_the_code_locations_jobs():
    assert set(JOBS) <= {job.name for job in build_definitions().resolve_all_job_defs()}
