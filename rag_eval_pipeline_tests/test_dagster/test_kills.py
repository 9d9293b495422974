"""kill -9 at every asset boundary of the synthesis and audit tracks: nothing half-written is ever read.

The test drives a real `rag-eval run` process and kills it by PID the moment a table (or the golden
set's manifest) appears. After each kill: every table on disk is whole, a version is visible to a gate
only when its manifest and table are both there, and the baseline history parses. Then the next run
starts from scratch on the same warehouse; the last one, run to the end in the test's process (as are
the register before and the gate between kills, see support/cli.py), completes with the content hash
the killed runs were producing.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import content_hash, latest_version, read_manifest
from rag_eval_pipeline_tests.support.cli import RAG_EVAL, rag_eval

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

PARTITION = ["acme", "v1"]
# In lineage order; audit tables sit in audits/commit=<c>/run=<id>/.
BOUNDARIES = [
    "raw_documents.parquet",
    "document_chunks.parquet",
    "chunk_clusters.parquet",
    "synthetic_qa.parquet",
    "golden_set.parquet",
    "golden_set.manifest.json",
    "audits/*/*/candidate_outputs.parquet",
    "audits/*/*/metric_scores.parquet",
    "audits/*/*/regression_report.parquet",
]


def _kill_when(env, folder: Path, pattern: str, seen_before: set[Path]) -> Path | None:
    """Start the full pipeline; SIGKILL it as soon as a new file matches pattern. The file, or None if it ended first."""
    process = subprocess.Popen(
        [RAG_EVAL, "run", "--tenant", "acme", "--version", "v1", "--commit", "c1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            fresh = [path for path in folder.glob(pattern) if path not in seen_before]
            if fresh:
                os.kill(process.pid, signal.SIGKILL)
                return fresh[0]
            time.sleep(0.02)
        return None
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _assert_nothing_half_written(warehouse: Warehouse) -> None:
    folder = warehouse.partition_dir(*PARTITION)
    for table in folder.rglob("*.parquet"):
        pd.read_parquet(table)  # a half-written table would not parse
    manifest = read_manifest(warehouse, *PARTITION)
    if manifest is None:
        assert latest_version(warehouse, "acme") is None  # an unpublished version is invisible to a gate
    else:
        assert content_hash(warehouse.read(*PARTITION, "golden_set")) == manifest.content_hash
        assert latest_version(warehouse, "acme") == "v1"
    history = warehouse.tenant_dir("acme") / "baseline_history.jsonl"
    if history.exists():
        for line in history.read_text().splitlines():
            json.loads(line)


def test_a_kill_at_any_boundary_never_leaves_anything_half_written(cli_env):
    assert rag_eval(cli_env, "register", "--tenant", "acme", "--version", "v1").returncode == 0
    warehouse = Warehouse(cli_env["RAG_EVAL_WAREHOUSE"])
    folder = warehouse.partition_dir(*PARTITION)
    hashes = set()
    for pattern in BOUNDARIES:
        seen = set(folder.glob(pattern))
        killed_at = _kill_when(cli_env, folder, pattern, seen)
        assert killed_at is not None, f"the run ended before {pattern} appeared"
        _assert_nothing_half_written(warehouse)
        if warehouse.exists(*PARTITION, "golden_set"):
            hashes.add(content_hash(warehouse.read(*PARTITION, "golden_set")))
        if pattern == "golden_set.parquet" and read_manifest(warehouse, *PARTITION) is None:
            gate = rag_eval(cli_env, "gate", "--tenant", "acme", "--candidate", "c0")
            assert gate.returncode == 2 and "no published golden set" in gate.stderr

    completed = rag_eval(cli_env, "run", "--tenant", "acme", "--version", "v1", "--commit", "c1")
    assert completed.returncode == 0, completed.stderr
    _assert_nothing_half_written(warehouse)
    manifest = read_manifest(warehouse, *PARTITION)
    assert hashes == {manifest.content_hash}  # every killed run was making the same golden set
