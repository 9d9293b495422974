"""A tiny code location for the Celery tests: one asset partitioned by (tenant, dataset_version).

Each run records where and when it ran (pid, working directory, TMPDIR, start and end times) as one
JSON file in $RAG_EVAL_CELERY_TEST_RECORDS, written then renamed. A run tagged `rag_eval_test/until` with
a file's path writes `<run_id>.started`, then works until that file exists, so a test decides when it
ends (not a clock). A run tagged `rag_eval_test/hold`
first writes a `<run_id>.started` file, leaves a half-written record beside it, and waits until the
test kills its worker (or 120 s pass), so a test can kill a worker mid-run. Like every lineage step it
takes the run_liveness resource, so its runs record who executes them and beat a heartbeat.
"""

import json
import os
import tempfile
import time
from pathlib import Path

from dagster import AssetExecutionContext, Definitions, asset, define_asset_job

from rag_eval_pipeline.core.files import atomic_write_text
from rag_eval_pipeline.partitions import TENANT_DIM, tenant_version_partitions
from rag_eval_pipeline.resources.liveness import RUN_LIVENESS_KEY, RunLivenessResource
from rag_eval_pipeline_tests.support.celery_workers import RECORDS_VARIABLE

HOLD_TAG = "rag_eval_test/hold"
UNTIL_TAG = "rag_eval_test/until"
WORK_SECONDS = 1.0
HOLD_SECONDS = 120.0
UNTIL_SECONDS = 600.0  # a guard only: the test releases the run (in a finally) long before


@asset(partitions_def=tenant_version_partitions)
def celery_probe(context: AssetExecutionContext, run_liveness: RunLivenessResource) -> None:
    started = time.time()
    records = Path(os.environ[RECORDS_VARIABLE])
    run_id = context.run.run_id
    record = {
        "run_id": run_id,
        "tenant": context.partition_key.keys_by_dimension[TENANT_DIM],
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "tmpdir": tempfile.gettempdir(),
        "started": started,
    }
    if HOLD_TAG in context.run.tags:
        _hold(records, record)
    elif UNTIL_TAG in context.run.tags:
        _work_until(Path(context.run.tags[UNTIL_TAG]), records, record)
    else:
        time.sleep(WORK_SECONDS)
    record["finished"] = time.time()
    atomic_write_text(records / f"{run_id}.json", json.dumps(record))


def _work_until(release: Path, records: Path, record: dict) -> None:
    """Say the run started, then keep its slot until the test creates `release` (or UNTIL_SECONDS pass)."""
    atomic_write_text(records / f"{record['run_id']}.started", json.dumps(record))
    deadline = time.monotonic() + UNTIL_SECONDS
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _hold(records: Path, record: dict) -> None:
    """Leave a half-written record (as a killed writer would) and wait to be killed."""
    partial = records / f".{record['run_id']}.json.partial"
    partial.write_text(json.dumps(record)[:20], encoding="utf-8")
    atomic_write_text(records / f"{record['run_id']}.started", json.dumps(record))
    time.sleep(HOLD_SECONDS)
    partial.unlink()


# Dagster's default executor, as the lineage's jobs have: runs on Celery choose `in_process` in their run
# config (queues.IN_PROCESS_RUN_CONFIG), so the step runs in the worker's pool process.
celery_probe_job = define_asset_job("celery_probe_job", selection=[celery_probe])

defs = Definitions(assets=[celery_probe], jobs=[celery_probe_job], resources={RUN_LIVENESS_KEY: RunLivenessResource()})
