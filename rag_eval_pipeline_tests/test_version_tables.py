"""A version's tables: the same table within float noise, one snapshot or a mixture, and the version's lock."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from rag_eval_pipeline.stores.layout import VERSION_LOCK_FILE
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.version_tables import (
    FLOAT_TOLERANCE,
    Lineage,
    differences,
    lineage_of,
    snapshot_problems,
    stamped,
    table_digest,
)


def _clusters() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "chunk_id": ["a.md#0", "a.md#1", "b.md#0"],
            "cluster_id": [0, 0, -1],
            "membership": [0.8127, 1.0, 0.0],
            "source_chunk_ids": [["a.md#0"], ["a.md#0", "a.md#1"], []],
        }
    )


def _stored(frame: pd.DataFrame, tmp_path) -> pd.DataFrame:
    """The frame as a store gives it back."""
    warehouse = Warehouse(tmp_path)
    warehouse.write("acme", "v1", "t", frame)
    return warehouse.read("acme", "v1", "t")


# ---- the same table ---------------------------------------------------------------------------


def test_a_table_equals_itself_read_back_and_stamped_by_another_run(tmp_path):
    stored = _stored(stamped(_clusters(), Lineage("chunk_clusters", "run-1")), tmp_path)
    again = stamped(_clusters(), Lineage("chunk_clusters", "run-2"))  # lists, not Parquet's arrays
    assert differences(stored, again) == []


def test_scores_within_float_noise_are_the_same_table(tmp_path):
    stored = _stored(_clusters(), tmp_path)
    noisy = _clusters().assign(membership=[0.8128, 1.0, 0.0])  # one unit of the 4th decimal: a rounding flip
    assert differences(stored, noisy) == []
    moved = _clusters().assign(membership=[0.8127 + 2 * FLOAT_TOLERANCE, 1.0, 0.0])
    assert differences(stored, moved) == ["column membership differs"]


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda f: f.assign(cluster_id=[0, 1, -1]), ["column cluster_id differs"]),
        (lambda f: f.assign(source_chunk_ids=[["a.md#0"], ["a.md#1"], []]), ["column source_chunk_ids differs"]),
        (lambda f: f.iloc[:2], ["2 rows instead of 3"]),
        (
            lambda f: f.drop(columns="membership"),
            [
                "columns ['chunk_id', 'cluster_id', 'source_chunk_ids'] instead of "
                "['chunk_id', 'cluster_id', 'membership', 'source_chunk_ids']"
            ],
        ),
    ],
)
def test_any_other_change_is_a_difference(tmp_path, change, expected):
    assert differences(_stored(_clusters(), tmp_path), change(_clusters())) == expected


def test_the_digest_is_of_the_content_not_the_lineage():
    first, second = stamped(_clusters(), Lineage("s", "run-1")), stamped(_clusters(), Lineage("s", "run-2"))
    assert table_digest(first) == table_digest(second) == table_digest(_clusters())
    assert table_digest(_clusters().iloc[:2]) != table_digest(first)
    assert lineage_of(first) == Lineage("s", "run-1") and lineage_of(_clusters()) is None


# ---- one snapshot ----------------------------------------------------------------------------


def _snapshot() -> dict[str, pd.DataFrame]:
    """documents -> chunks -> (golden, plan written by one step), all from run r1."""
    documents = stamped(pd.DataFrame({"doc_id": ["a.md", "b.md"]}), Lineage("raw_documents", "r1"))
    chunks = stamped(
        pd.DataFrame({"chunk_id": ["a.md#0", "b.md#0"]}),
        Lineage("document_chunks", "r1", {"raw_documents": table_digest(documents)}),
    )
    made_from = {"document_chunks": table_digest(chunks)}
    golden = stamped(pd.DataFrame({"qa_id": ["q1"], "gold": [["b.md#0"]]}), Lineage("golden_set", "r1", made_from))
    plan = stamped(pd.DataFrame({"kept": [1]}), Lineage("golden_set", "r1", made_from))
    return {"raw_documents": documents, "document_chunks": chunks, "golden_set": golden, "synthesis_plan": plan}


def test_tables_built_from_each_other_are_one_snapshot():
    assert snapshot_problems(_snapshot()) == []


def test_a_table_rewritten_by_another_run_from_other_documents_is_a_mixture():
    tables = _snapshot()
    # Another run read a folder without b.md and rewrote the documents: the chunks were not built from them.
    tables["raw_documents"] = stamped(pd.DataFrame({"doc_id": ["a.md"]}), Lineage("raw_documents", "r2"))
    assert snapshot_problems(tables) == [
        "document_chunks (run r1) was built from another raw_documents than the stored one"
    ]


def test_tables_one_step_writes_together_must_come_from_one_run():
    tables = _snapshot()
    tables["synthesis_plan"] = stamped(
        tables["synthesis_plan"], Lineage("golden_set", "r2", lineage_of(tables["golden_set"]).inputs)
    )
    assert snapshot_problems(tables) == ["the tables of step golden_set were written by different runs (r1, r2)"]


def test_missing_and_unstamped_tables_the_golden_set_was_built_from_are_not_a_snapshot():
    unstamped = pd.DataFrame({"doc_id": ["a.md", "b.md"]})
    assert snapshot_problems({**_snapshot(), "raw_documents": unstamped}) == [
        "raw_documents does not say what it was built from (written before tables carried their lineage)",
    ]
    assert snapshot_problems({**_snapshot(), "document_chunks": None}) == ["document_chunks is missing"]
    # A table nothing in the golden set's lineage read is not required (a stand-in graph may lack it).
    assert snapshot_problems({**_snapshot(), "rejected_qa": None}) == []


# ---- the version's lock ----------------------------------------------------------------------

# Tries the version's lock from another process without waiting: prints "held" or "free".
PROBE = """
import sys
from filelock import FileLock, Timeout
try:
    with FileLock(sys.argv[1], timeout=0):
        print("free")
except Timeout:
    print("held")
"""


def _probe(path) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_version_lock_excludes_other_processes_and_is_reentrant(tmp_path):
    warehouse = Warehouse(tmp_path)
    path = warehouse.partition_dir("acme", "v1") / VERSION_LOCK_FILE
    with warehouse.version_lock("acme", "v1"):
        with warehouse.version_lock("acme", "v1"):  # publish() inside publish_snapshot()
            assert _probe(path) == "held"
        assert _probe(path) == "held"
    assert _probe(path) == "free"
    with warehouse.version_lock("acme", "v2"):  # versions do not wait for each other
        assert _probe(path) == "free"


def test_an_unusable_version_name_is_refused_before_any_lock(tmp_path):
    with pytest.raises(ValueError, match="invalid dataset version name"):
        with Warehouse(tmp_path).version_lock("acme", "../v1"):
            pass
    assert not any(tmp_path.rglob("*"))
