"""A tenant's labels in its results store: kept apart from every dataset version, replaced whole, merged
under a lock so concurrent writers keep each other's rows, and (in Postgres) visible to that tenant only."""

import multiprocessing
import uuid

import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.names import PartitionNameError, validate_name
from rag_eval_pipeline.evaluation.labels import items_with_labels, label_rows, read_labels, store_labels
from rag_eval_pipeline.stores.local import TENANT_TABLES_FOLDER, Warehouse


def _item(i: int) -> EvalItem:
    return EvalItem(f"q{i}", f"question {i}?", f"answer {i}.", [{"id": "c1", "text": f"context {i}."}], f"truth {i}.")


def test_labels_are_merged_by_item_and_metric_and_a_newer_label_wins(tmp_path):
    store = Warehouse(tmp_path)
    store_labels(store, "acme", label_rows(_item(1), {"faithfulness": 1, "answer_correctness": 0.5}, "sheet-a"))
    store_labels(store, "acme", label_rows(_item(1), {"faithfulness": 0}, "sheet-b"))
    store_labels(store, "acme", label_rows(_item(2), {"faithfulness": 1}, "sheet-b"))
    labels = read_labels(store, "acme")
    assert len(labels) == 3
    (first, first_labels), (second, second_labels) = items_with_labels(labels)
    assert first_labels == {"faithfulness": 0.0, "answer_correctness": 0.5}
    assert first.question == "question 1?" and first.contexts == [{"id": "c1", "text": "context 1."}]
    assert second_labels == {"faithfulness": 1.0}
    assert read_labels(store, "globex").empty  # another tenant has none
    assert (tmp_path / "acme" / TENANT_TABLES_FOLDER / "judge_labels.parquet").is_file()
    with pytest.raises(PartitionNameError):  # the folder can never be taken for a dataset version
        validate_name("dataset version", TENANT_TABLES_FOLDER)


def _write_many(root: str, worker: int, count: int) -> None:
    store = Warehouse(root)
    for i in range(count):
        store_labels(store, "acme", label_rows(_item(worker * 100 + i), {"faithfulness": 1}, f"worker {worker}"))


def test_concurrent_writers_in_separate_processes_keep_every_label(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(tmp_path), w, 15)) for w in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    assert len(read_labels(Warehouse(tmp_path), "acme")) == 45


@pytest.mark.postgres
def test_in_postgres_a_tenants_labels_are_its_own(app_database):
    from rag_eval_pipeline.stores.database.results import DatabaseStore

    store = DatabaseStore(app_database)
    mine, theirs = f"labels-{uuid.uuid4().hex[:8]}", f"labels-{uuid.uuid4().hex[:8]}"
    store_labels(store, mine, label_rows(_item(1), {"faithfulness": 1}, "sheet"))
    store_labels(store, mine, label_rows(_item(2), {"faithfulness": 0}, "sheet"))
    assert sorted(read_labels(store, mine)["label"]) == [0.0, 1.0]
    assert read_labels(store, theirs).empty
    assert store.read_tenant_table(theirs, "judge_labels") is None
