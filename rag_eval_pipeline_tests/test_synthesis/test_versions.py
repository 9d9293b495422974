"""Golden-set versions: content hash, publish-once manifests, and the diff between two versions."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pandas as pd
import pytest

from rag_eval_pipeline.stores.layout import VERSION_LOCK_FILE
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.version_tables import Lineage, VersionTables, stamped, table_digest
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    MULTI_CONTEXT,
    REFUSAL,
    SIMPLE,
    UNANSWERABLE,
    items_frame,
)
from rag_eval_pipeline.synthesis.versions import (
    DIFF_COLUMNS,
    MANIFEST_FILE,
    GoldenSetImmutable,
    GoldenSetUnpublished,
    MixedSnapshot,
    PublishedVersionImmutable,
    check_publishable,
    content_hash,
    diff_summary,
    diff_versions,
    latest_version,
    must_write,
    publish,
    publish_snapshot,
    read_manifest,
    require_published,
)
from rag_eval_pipeline_tests.synthesis_items import item_from
from rag_eval_pipeline_tests.test_version_tables import _probe

CHUNKS = {
    "retention.md#0": "RouteWise API request logs are retained for 90 days and then deleted automatically.",
    "retention.md#1": "Database backups of the shipment system are kept for 35 days in a separate region.",
    "travel.md#0": "Flights must be booked at least 14 days before departure unless the trip is urgent.",
}


def _item(question_type, chunk_ids, question, ground_truth):
    return item_from(CHUNKS, question_type, chunk_ids, question, ground_truth)


def _golden(items) -> pd.DataFrame:
    frame = items_frame(items)
    frame["round_trip_rank"] = [1 if len(ids) else -1 for ids in frame["gold_chunk_ids"]]
    frame["grounded"] = True
    frame["quality_score"] = 1.0
    return frame[GOLDEN_COLUMNS]


ITEMS = [
    _item(SIMPLE, ["retention.md#0"], "How long are API request logs retained?", "They are retained for 90 days."),
    _item(SIMPLE, ["retention.md#1"], "How long are database backups kept?", "Backups are kept for 35 days."),
    _item(
        MULTI_CONTEXT,
        ["retention.md#0", "retention.md#1"],
        "Which is kept longer, logs or backups?",
        "Logs (90 days) are kept longer than backups (35 days).",
    ),
    _item(UNANSWERABLE, ["travel.md#0"], "What is the per-diem for meals in Tokyo?", REFUSAL),
]
# The second item with its question reworded: a new qa_id.
REWORDED = _item(SIMPLE, ["retention.md#1"], "For how many days are backups kept?", "Backups are kept for 35 days.")


@pytest.fixture
def golden() -> pd.DataFrame:
    return _golden(ITEMS)


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "warehouse")


# ---- content hash ----------------------------------------------------------------------------


def test_content_hash_ignores_row_and_column_order(golden):
    shuffled = golden.iloc[::-1].reset_index(drop=True)[list(reversed(golden.columns))]
    assert content_hash(shuffled) == content_hash(golden)


def test_content_hash_survives_a_parquet_round_trip(golden, warehouse):
    # The asset hashes the frame it returns; a re-run may hash what was read back from Parquet.
    warehouse.write("acme", "v1", "golden_set", golden)
    assert content_hash(warehouse.read("acme", "v1", "golden_set")) == content_hash(golden)


@pytest.mark.parametrize(
    "column, value",
    [
        ("question", "How long are API logs retained?"),
        ("ground_truth", "They are retained for 60 days."),
        ("gold_chunk_ids", ["retention.md#1"]),
        ("question_type", "reasoning"),
        ("qa_id", "another-id"),
    ],
)
def test_content_hash_changes_with_the_content(golden, column, value):
    changed = golden.copy()
    changed.at[0, column] = value
    assert content_hash(changed) != content_hash(golden)


def test_content_hash_ignores_bookkeeping_columns(golden):
    changed = golden.assign(generator="llm:other", round_trip_rank=3, grounded=False)
    assert content_hash(changed) == content_hash(golden)


def test_content_hash_of_a_subset_differs(golden):
    assert content_hash(golden.iloc[:3]) != content_hash(golden)


# ---- publish ---------------------------------------------------------------------------------


def _publish(warehouse, tenant, version, golden, **manifest_fields):
    """As the lineage does it: refuse a change to a published set, write the table, then the manifest."""
    check_publishable(warehouse, tenant, version, golden)
    warehouse.write(tenant, version, "golden_set", golden)
    return publish(warehouse, tenant, version, golden, **manifest_fields)


def test_the_manifest_is_written_only_after_its_table(golden, warehouse):
    with pytest.raises(FileNotFoundError):
        publish(warehouse, "acme", "v1", golden)  # no table on disk yet: nothing is published
    warehouse.write("acme", "v1", "golden_set", golden.iloc[:2])
    with pytest.raises(GoldenSetUnpublished, match="on disk is not the one being published"):
        publish(warehouse, "acme", "v1", golden)
    assert read_manifest(warehouse, "acme", "v1") is None and latest_version(warehouse, "acme") is None


def test_a_manifest_without_its_table_is_not_a_published_version(golden, warehouse):
    """What a kill between the two writes used to leave: the gate must not pick it."""
    _publish(warehouse, "acme", "v1", golden)
    _publish(warehouse, "acme", "v2", golden.iloc[:2])
    assert latest_version(warehouse, "acme") == "v2"
    warehouse.table_path("acme", "v2", "golden_set").unlink()
    assert latest_version(warehouse, "acme") == "v1"


def test_audits_need_the_published_table(golden, warehouse):
    with pytest.raises(GoldenSetUnpublished, match="acme/v1 is not published"):
        require_published(warehouse, "acme", "v1", golden)
    _publish(warehouse, "acme", "v1", golden)
    assert require_published(warehouse, "acme", "v1", golden).n_items == 4
    with pytest.raises(GoldenSetUnpublished, match="does not match its published manifest"):
        require_published(warehouse, "acme", "v1", golden.iloc[:2])


def test_first_publish_writes_the_manifest(golden, warehouse):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    manifest = _publish(warehouse, "acme", "v1", golden)

    path = warehouse.partition_dir("acme", "v1") / MANIFEST_FILE
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk["content_hash"] == content_hash(golden) == manifest.content_hash
    assert on_disk["n_items"] == 4
    assert on_disk["counts_by_type"] == {"multi_context": 1, "simple": 2, "unanswerable": 1}
    assert on_disk["source"] == "synthesis"
    assert on_disk["parent_version"] is None
    published = datetime.fromisoformat(on_disk["published_at"])
    assert published.utcoffset().total_seconds() == 0  # UTC
    assert before <= published <= datetime.now(timezone.utc)
    assert read_manifest(warehouse, "acme", "v1") == manifest


def test_read_manifest_of_an_unpublished_version_is_none(warehouse):
    assert read_manifest(warehouse, "acme", "v1") is None


def test_publishing_the_same_content_again_is_a_no_op(golden, warehouse):
    first = _publish(warehouse, "acme", "v1", golden)
    path = warehouse.partition_dir("acme", "v1") / MANIFEST_FILE
    text = path.read_text(encoding="utf-8")

    again = _publish(warehouse, "acme", "v1", golden.iloc[::-1].reset_index(drop=True), source="review of v0")

    assert again == first  # the original date and source stay
    assert path.read_text(encoding="utf-8") == text


def test_publishing_different_content_raises(golden, warehouse):
    first = _publish(warehouse, "acme", "v1", golden)
    changed = golden.copy()
    changed.at[1, "ground_truth"] = "Backups are kept for 30 days."

    with pytest.raises(GoldenSetImmutable) as raised:
        _publish(warehouse, "acme", "v1", changed)

    message = str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert "golden set of acme/v1 is published" in message
    assert first.content_hash[:12] in message and first.published_at in message
    assert "rag-eval register --tenant acme --version <new>" in message
    assert read_manifest(warehouse, "acme", "v1") == first  # untouched


def test_dropping_an_item_is_different_content(golden, warehouse):
    _publish(warehouse, "acme", "v1", golden)
    with pytest.raises(GoldenSetImmutable):
        _publish(warehouse, "acme", "v1", golden.iloc[1:])


def test_versions_are_published_independently(golden, warehouse):
    _publish(warehouse, "acme", "v1", golden)
    manifest = _publish(warehouse, "acme", "v2", golden.iloc[:2], source="review of v1", parent_version="v1")

    assert manifest.source == "review of v1" and manifest.parent_version == "v1"
    assert manifest.n_items == 2 and manifest.counts_by_type == {"simple": 2}
    assert read_manifest(warehouse, "acme", "v1").n_items == 4


def test_publish_rejects_bad_names(golden, warehouse):
    with pytest.raises(ValueError, match="invalid dataset version name"):
        _publish(warehouse, "acme", "V 1", golden)


# ---- diff ------------------------------------------------------------------------------------


def test_diff_of_identical_versions_is_empty(golden):
    diff = diff_versions(golden, golden.iloc[::-1])
    assert diff.empty and list(diff.columns) == DIFF_COLUMNS
    assert diff_summary(diff) == {"added": 0, "removed": 0, "edited": 0}


def test_diff_lists_added_and_removed_items(golden):
    flights = _item(SIMPLE, ["travel.md#0"], "How early must flights be booked?", "At least 14 days before.")
    new = _golden([*ITEMS[1:], flights])

    diff = diff_versions(golden, new)

    rows = {r["change"]: r for r in diff.to_dict("records")}
    assert len(diff) == 2
    assert rows["removed"]["qa_id"] == golden.at[0, "qa_id"]
    assert rows["removed"]["question"] == "How long are API request logs retained?"
    assert rows["added"]["qa_id"] == flights.qa_id
    assert rows["added"]["question_type"] == SIMPLE
    assert diff_summary(diff) == {"added": 1, "removed": 1, "edited": 0}


def test_an_edited_question_without_derived_from_is_removed_plus_added(golden):
    new = _golden([ITEMS[0], REWORDED, *ITEMS[2:]])
    assert REWORDED.qa_id != ITEMS[1].qa_id

    assert diff_summary(diff_versions(golden, new)) == {"added": 1, "removed": 1, "edited": 0}


def test_derived_from_turns_removed_plus_added_into_edited(golden):
    new = _golden([ITEMS[0], REWORDED, *ITEMS[2:]]).assign(derived_from=["", ITEMS[1].qa_id, "", ""])

    diff = diff_versions(golden, new)

    assert len(diff) == 1
    row = diff.iloc[0]
    assert row["change"] == "edited"
    assert row["qa_id"] == REWORDED.qa_id and row["derived_from"] == ITEMS[1].qa_id
    assert row["question"] == "For how many days are backups kept?"
    assert row["old_question"] == "How long are database backups kept?"
    assert diff_summary(diff) == {"added": 0, "removed": 0, "edited": 1}


def test_a_changed_ground_truth_under_the_same_qa_id_is_edited(golden):
    new = golden.copy()
    new.at[0, "ground_truth"] = "Request logs are retained for 90 days, then deleted."

    diff = diff_versions(golden, new)

    assert diff["change"].tolist() == ["edited"]
    assert diff.at[0, "qa_id"] == golden.at[0, "qa_id"]


def test_derived_from_an_item_still_present_is_an_addition(golden):
    # The old item stays, so the derived one is new beside it, not an edit of it.
    new = _golden([*ITEMS, REWORDED]).assign(derived_from=["", "", "", "", ITEMS[0].qa_id])

    assert diff_summary(diff_versions(golden, new)) == {"added": 1, "removed": 0, "edited": 0}


def test_missing_derived_from_values_are_ignored(golden):
    new = _golden([ITEMS[0], REWORDED, *ITEMS[2:]]).assign(derived_from=[None, float("nan"), "", None])

    assert diff_summary(diff_versions(golden, new)) == {"added": 1, "removed": 1, "edited": 0}


@pytest.mark.parametrize("text, problem", [("[1, 2]", "the file"), ('{"tenant": "acme"}', "dataset_version")])
def test_a_malformed_manifest_is_one_clear_error_naming_the_file(golden, warehouse, text, problem):
    warehouse.write("acme", "v1", "golden_set", golden)
    publish(warehouse, "acme", "v1", golden)
    path = warehouse.partition_dir("acme", "v1") / MANIFEST_FILE
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        read_manifest(warehouse, "acme", "v1")
    assert str(path) in str(error.value) and problem in str(error.value) and "\n" not in str(error.value)


# ---- a golden set without items, and two publishers at once -----------------------------------


def test_a_golden_set_without_items_is_never_published(golden, warehouse):
    empty = golden.iloc[:0]
    warehouse.write("acme", "v1", "golden_set", empty)
    with pytest.raises(ValueError, match="acme/v1 has no items: a golden set without items is never published"):
        publish(warehouse, "acme", "v1", empty)
    assert read_manifest(warehouse, "acme", "v1") is None


def test_nothing_is_audited_on_a_published_golden_set_without_items(golden, warehouse):
    """One published before publication refused it, or written by hand."""
    from dataclasses import asdict

    from rag_eval_pipeline.synthesis.versions import Manifest

    empty = golden.iloc[:0]
    warehouse.write("acme", "v1", "golden_set", empty)
    manifest = Manifest("acme", "v1", content_hash(empty), 0, {}, "2030-01-01T00:00:00+00:00", "synthesis", None)
    (warehouse.partition_dir("acme", "v1") / MANIFEST_FILE).write_text(json.dumps(asdict(manifest)), encoding="utf-8")

    with pytest.raises(GoldenSetUnpublished, match="the golden set of acme/v1 has no items: nothing can be audited"):
        require_published(warehouse, "acme", "v1", empty)


class _RacedWarehouse(Warehouse):
    """A real warehouse in which another publisher's manifest lands after publish checked, before it writes."""

    def __init__(self, root, rival):
        super().__init__(root)
        self.rival = rival

    def write_text(self, tenant, dataset_version, filename, text):
        Warehouse(self.root).write_text(tenant, dataset_version, filename, self.rival)
        return super().write_text(tenant, dataset_version, filename, text)


def test_of_two_publishers_at_once_the_first_manifest_stays_and_the_other_is_told(golden, warehouse, tmp_path):
    first = _publish(Warehouse(tmp_path / "other"), "acme", "v1", golden.iloc[:2])
    rival = (Warehouse(tmp_path / "other").partition_dir("acme", "v1") / MANIFEST_FILE).read_text(encoding="utf-8")
    raced = _RacedWarehouse(warehouse.root, rival)
    raced.write("acme", "v1", "golden_set", golden)

    with pytest.raises(GoldenSetImmutable, match="acme/v1 was published by another run at the same time"):
        publish(raced, "acme", "v1", golden)

    assert read_manifest(warehouse, "acme", "v1") == first  # the first one kept, not replaced


def test_the_same_content_published_twice_at_once_is_one_publication(golden, warehouse, tmp_path):
    first = _publish(Warehouse(tmp_path / "other"), "acme", "v1", golden)
    rival = (Warehouse(tmp_path / "other").partition_dir("acme", "v1") / MANIFEST_FILE).read_text(encoding="utf-8")
    raced = _RacedWarehouse(warehouse.root, rival)
    raced.write("acme", "v1", "golden_set", golden)

    assert publish(raced, "acme", "v1", golden) == first == read_manifest(warehouse, "acme", "v1")


# ---- everything a published golden set was built from ------------------------------------------

SNAPSHOT_TABLES = ("raw_documents", "document_chunks", "golden_set")
DOCUMENTS = pd.DataFrame({"doc_id": ["retention.md", "travel.md"], "content_hash": ["h1", "h2"]})
CHUNK_TABLE = pd.DataFrame({"chunk_id": list(CHUNKS), "text": list(CHUNKS.values())})


def _write_run(warehouse, run_id, documents=DOCUMENTS, chunks=CHUNK_TABLE, golden=None, version="v1") -> dict:
    """What one synthesis run writes, each table stamped with the stored tables it was built from."""
    written = {}
    for name, frame, inputs in (
        ("raw_documents", documents, ()),
        ("document_chunks", chunks, ("raw_documents",)),
        ("golden_set", golden, ("document_chunks",)),
    ):
        if frame is None:
            continue
        lineage = Lineage(
            name, run_id, {source: table_digest(warehouse.read("acme", version, source)) for source in inputs}
        )
        warehouse.write("acme", version, name, stamped(frame, lineage))
        written[name] = frame
    return written


def _checked(warehouse, version="v1") -> dict[str, str]:
    return {"golden_set": table_digest(warehouse.read("acme", version, "golden_set"))}


def test_a_published_version_keeps_every_table_it_was_built_from(golden, warehouse):
    tables = VersionTables(warehouse, warehouse)
    _write_run(warehouse, "r1", golden=golden)
    assert must_write(tables, "acme", "v1", "raw_documents", DOCUMENTS.iloc[:1])  # unpublished: anything goes
    manifest = publish_snapshot(tables, "acme", "v1", golden, _checked(warehouse), SNAPSHOT_TABLES)

    assert must_write(tables, "acme", "v1", "raw_documents", DOCUMENTS.copy()) is False  # the same: nothing to write
    with pytest.raises(PublishedVersionImmutable) as refused:
        must_write(tables, "acme", "v1", "raw_documents", DOCUMENTS.iloc[:1])
    message = str(refused.value)
    assert isinstance(refused.value, GoldenSetImmutable) and "\n" not in message
    assert message.startswith(f"acme/v1 is published (golden set {manifest.content_hash[:12]}")
    assert "this run's raw_documents table is not the published one (1 rows instead of 2)" in message
    assert "`rag-eval register --tenant acme --version <new>`" in message
    with pytest.raises(PublishedVersionImmutable, match="has no such table"):
        must_write(tables, "acme", "v1", "chunk_clusters", CHUNK_TABLE)
    assert must_write(tables, "acme", "v2", "raw_documents", DOCUMENTS.iloc[:1])  # another version is free


def test_a_mixture_of_two_runs_is_not_published_and_the_next_whole_run_is(golden, warehouse):
    tables = VersionTables(warehouse, warehouse)
    _write_run(warehouse, "r1", golden=golden)
    _write_run(warehouse, "r2", documents=DOCUMENTS.iloc[:1], chunks=None)  # another run read one document less

    with pytest.raises(MixedSnapshot) as refused:
        publish_snapshot(tables, "acme", "v1", golden, _checked(warehouse), SNAPSHOT_TABLES)
    assert str(refused.value) == (
        "acme/v1 is not published: its tables are not one snapshot (document_chunks (run r1) was built from another "
        "raw_documents than the stored one); another run wrote some of them, or a run stopped half way: run the "
        "synthesis job again to publish it"
    )
    assert read_manifest(warehouse, "acme", "v1") is None

    _write_run(warehouse, "r2", documents=DOCUMENTS.iloc[:1], golden=golden)  # the next run, whole
    assert publish_snapshot(tables, "acme", "v1", golden, _checked(warehouse), SNAPSHOT_TABLES).n_items == len(golden)


def test_a_golden_set_rewritten_after_its_check_read_it_is_not_published(golden, warehouse):
    tables = VersionTables(warehouse, warehouse)
    _write_run(warehouse, "r1", golden=golden)
    checked = _checked(warehouse)
    _write_run(warehouse, "r1", golden=golden.iloc[:2])  # between the check's read and the publication
    with pytest.raises(MixedSnapshot, match="golden_set changed after the check read it"):
        publish_snapshot(tables, "acme", "v1", golden, checked, SNAPSHOT_TABLES)


class _ProbingStore:
    """The warehouse, asking another process for the version's lock at every table read."""

    def __init__(self, warehouse):
        self.warehouse, self.seen = warehouse, []

    def read(self, tenant, version, name):
        self.seen.append(_probe(self.warehouse.partition_dir(tenant, version) / VERSION_LOCK_FILE))
        return self.warehouse.read(tenant, version, name)


def test_no_write_can_slip_in_between_the_snapshot_check_and_the_manifest(golden, warehouse):
    _write_run(warehouse, "r1", golden=golden)
    probing = _ProbingStore(warehouse)
    publish_snapshot(VersionTables(warehouse, probing), "acme", "v1", golden, _checked(warehouse), SNAPSHOT_TABLES)

    assert probing.seen == ["held"] * 3  # every table read for the check, and on to the manifest, under the lock
    assert read_manifest(warehouse, "acme", "v1") is not None
    assert _probe(warehouse.partition_dir("acme", "v1") / VERSION_LOCK_FILE) == "free"
