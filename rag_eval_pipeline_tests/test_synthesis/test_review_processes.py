"""`rag-eval review import` and `rag-eval gate` as real processes: an import killed (SIGKILL) after its
tables and before its manifest, two imports into one new version at once, and a gate on an empty golden set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.stores.layout import MANIFEST_FILE
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS, REJECTED_COLUMNS
from rag_eval_pipeline.synthesis.review import review_sheet, write_sheet
from rag_eval_pipeline.synthesis.versions import Manifest, content_hash, latest_version, read_manifest
from rag_eval_pipeline_tests.review_fixtures import HOTEL, ITEMS, LOGS, golden_frame, lay_out_version

pytestmark = pytest.mark.cli

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
REPO_ROOT = Path(__file__).resolve().parents[2]
# Earlier rejections of the reviewed version: the import copies them into its own rejected_qa right after
# the golden set, which keeps the import busy between its golden set and its manifest long enough for a
# poller to catch it there on any machine.
EARLIER_REJECTIONS = 300_000


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    warehouse = Warehouse(tmp_path / "warehouse")
    golden = golden_frame(ITEMS)
    earlier = pd.DataFrame(
        [{**golden.iloc[0].to_dict(), "stage": "verification", "reason": "duplicate question"}],
        columns=REJECTED_COLUMNS,
    )
    earlier = earlier.loc[earlier.index.repeat(EARLIER_REJECTIONS)].reset_index(drop=True)
    earlier["qa_id"] = [f"dropped-{n}" for n in range(EARLIER_REJECTIONS)]
    lay_out_version(warehouse, "acme", "v1", golden, rejected=earlier)
    return warehouse


@pytest.fixture
def env(tmp_path, warehouse) -> dict:
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_WAREHOUSE": str(warehouse.root),
        "PYTHONPATH": str(REPO_ROOT),
    }
    environment.pop("RAG_EVAL_DATABASE_URL", None)  # the embedded warehouse, where import works
    return environment


def _sheet(tmp_path, name: str, rejected_qa_id: str) -> Path:
    sheet = review_sheet(golden_frame(ITEMS))
    sheet.loc[sheet["qa_id"] == rejected_qa_id, "decision"] = "reject"
    return write_sheet(sheet, tmp_path / name)


def _import_command(sheet: Path, new_version: str) -> list[str]:
    return [
        RAG_EVAL,
        "review",
        "import",
        "--tenant",
        "acme",
        "--version",
        "v1",
        "--file",
        str(sheet),
        "--new-version",
        new_version,
    ]


def _kill_after_the_golden_set(env, warehouse: Warehouse, sheet: Path, version: str) -> bool:
    """Start an import; SIGKILL it once its golden set is on disk. True when its manifest was not written yet."""
    golden = warehouse.table_path("acme", version, "golden_set")
    manifest = warehouse.partition_dir("acme", version) / MANIFEST_FILE
    process = subprocess.Popen(
        _import_command(sheet, version), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if golden.exists():
                os.kill(process.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    return process.returncode == -signal.SIGKILL and golden.exists() and not manifest.exists()


def test_an_import_killed_between_its_golden_set_and_its_manifest_leaves_the_name_free(env, warehouse, tmp_path):
    first = _sheet(tmp_path, "first.csv", LOGS.qa_id)
    # The kill must land in the window; a machine that outran the poller gets another try under a new name.
    version = next((v for v in ("v2", "v3", "v4") if _kill_after_the_golden_set(env, warehouse, first, v)), None)
    assert version is not None, "the import finished before the poller saw its golden set, three times"
    assert latest_version(warehouse, "acme") == "v1"  # the killed import published nothing

    second = _sheet(tmp_path, "second.csv", HOTEL.qa_id)
    again = subprocess.run(_import_command(second, version), env=env, capture_output=True, text=True, timeout=600)

    assert again.returncode == 0, again.stderr
    golden = warehouse.read("acme", version, "golden_set")
    assert HOTEL.qa_id not in set(golden["qa_id"]) and LOGS.qa_id in set(golden["qa_id"])  # the second sheet's
    assert read_manifest(warehouse, "acme", version).content_hash == content_hash(golden)
    rejected = warehouse.read("acme", version, "rejected_qa")
    assert len(rejected) == EARLIER_REJECTIONS + 1 and rejected["qa_id"].iloc[-1] == HOTEL.qa_id
    assert latest_version(warehouse, "acme") == version


def test_two_imports_into_one_new_version_publish_one_of_them(env, warehouse, tmp_path):
    sheets = {
        LOGS.qa_id: _sheet(tmp_path, "logs.csv", LOGS.qa_id),
        HOTEL.qa_id: _sheet(tmp_path, "hotel.csv", HOTEL.qa_id),
    }
    processes = {
        rejected: subprocess.Popen(
            _import_command(sheet, "v2"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for rejected, sheet in sheets.items()
    }
    outcomes = {
        rejected: (process.wait(timeout=600), process.stdout.read(), process.stderr.read())
        for rejected, process in processes.items()
    }

    assert sorted(status for status, _, _ in outcomes.values()) == [0, 2], outcomes
    [winner] = [rejected for rejected, (status, _, _) in outcomes.items() if status == 0]
    [loser] = [outcome for outcome in outcomes.values() if outcome[0] == 2]
    assert "acme/v2 already has a published golden set" in loser[2]
    golden = warehouse.read("acme", "v2", "golden_set")
    assert winner not in set(golden["qa_id"]) and len(golden) == len(ITEMS) - 1  # the winner's review, whole
    assert read_manifest(warehouse, "acme", "v2").content_hash == content_hash(golden)
    assert warehouse.read("acme", "v2", "rejected_qa")["qa_id"].iloc[-1] == winner


@pytest.mark.dagster
def test_a_gate_on_a_published_golden_set_without_items_exits_2_with_one_line(env, warehouse):
    """Such a version can no longer be made (publication refuses it); one written by hand must not crash a gate."""
    golden = pd.DataFrame(columns=GOLDEN_COLUMNS)
    warehouse.write("acme", "v9", "golden_set", golden)
    warehouse.write("acme", "v9", "document_chunks", warehouse.read("acme", "v1", "document_chunks"))
    manifest = Manifest("acme", "v9", content_hash(golden), 0, {}, "2030-01-01T00:00:00+00:00", "synthesis", None)
    (warehouse.partition_dir("acme", "v9") / MANIFEST_FILE).write_text(json.dumps(asdict(manifest)), encoding="utf-8")
    assert latest_version(warehouse, "acme") == "v9"
    registered = subprocess.run(
        [RAG_EVAL, "register", "--tenant", "acme", "--version", "v9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert registered.returncode == 0, registered.stderr

    gate = subprocess.run(
        [RAG_EVAL, "gate", "--tenant", "acme", "--candidate", "c1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert gate.returncode == 2
    lines = gate.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "KeyError" not in lines[0], gate.stderr
    assert "acme/v9 has no items" in lines[0]

    # The audit job itself refuses it too, naming why, instead of failing on a missing column.
    audit = subprocess.run(
        [RAG_EVAL, "run", "--tenant", "acme", "--version", "v9", "--job", "audit"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert audit.returncode == 2
    assert "acme/v9 has no items" in audit.stderr and "KeyError" not in audit.stderr
