"""The offline template generator: one grounded question per chunk, spread over the clusters."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.synthesis.generation import (
    GENERATOR,
    TEMPLATE_VERSION,
    QAItem,
    generate_offline,
    items_frame,
    question_for_chunk,
)
from rag_eval_pipeline.text import split_sentences

# Every chunk below holds at least one factual sentence the templates can turn into a question.
CHUNKS = {
    # cluster 0: four chunks, listed first so a naive generator would exhaust it before the others
    "retention.md#0": ("retention.md", "Retention", 0, 1.0,
                       "Logs are short lived. RouteWise API request logs are retained for 90 days and then deleted automatically."),
    "retention.md#1": ("retention.md", "Backups", 0, 0.9,
                       "Database backups of the shipment system are kept for 35 days in a separate region."),
    "retention.md#2": ("retention.md", "Deletion", 0, 0.8,
                       "Deleted customer accounts are purged from every replica within 30 days of the request."),
    "retention.md#3": ("retention.md", "Archive", 0, 0.7,
                       "The archive bucket stores closed contracts for 10 years under legal hold."),
    # cluster 1
    "travel.md#0": ("travel.md", "Flights", 1, 1.0,
                    "Flights must be booked at least 14 days before departure unless the trip is urgent."),
    "travel.md#1": ("travel.md", "Hotels", 1, 0.6,
                    "The hotel cap is EUR 230 per night in London, Paris, New York, Zurich and Singapore."),
    # cluster 2
    "oncall.md#0": ("oncall.md", "Shifts", 2, 1.0,
                    "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday."),
}
TITLES = {"retention.md": "Data Retention Policy", "travel.md": "Travel Policy", "oncall.md": "On-Call Handbook"}


def _frames(chunks: dict = CHUNKS) -> tuple[pd.DataFrame, pd.DataFrame]:
    chunk_rows = [
        {"chunk_id": cid, "doc_id": doc, "heading": heading, "text": text}
        for cid, (doc, heading, _, _, text) in chunks.items()
    ]
    cluster_rows = [
        {"chunk_id": cid, "cluster_id": cluster, "is_outlier": cluster == -1, "membership": membership}
        for cid, (_, _, cluster, membership, _) in chunks.items()
    ]
    return pd.DataFrame(chunk_rows), pd.DataFrame(cluster_rows)


def test_every_chunk_here_yields_an_item():
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, TITLES, max_items=40)

    assert sorted(i.gold_chunk_ids[0] for i in items) == sorted(CHUNKS)


def test_ground_truth_is_a_sentence_of_the_gold_chunk():
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, TITLES, max_items=40)

    assert items
    for item in items:
        assert len(item.gold_chunk_ids) == 1
        chunk_id = item.gold_chunk_ids[0]
        text = CHUNKS[chunk_id][4]
        assert item.gold_contexts == [text]
        assert item.ground_truth in split_sentences(text)
        assert item.source_cluster == CHUNKS[chunk_id][2]
        assert item.question_type == "simple"
        assert (item.generator, item.prompt_version) == (GENERATOR, TEMPLATE_VERSION)
        assert item.question.endswith(("?", '"'))


def test_the_most_informative_sentence_is_chosen():
    chunks, clusters = _frames()
    items = {i.gold_chunk_ids[0]: i for i in generate_offline(chunks, clusters, TITLES, max_items=40)}

    # "Logs are short lived." is too short to be a fact; the sentence with a quantity is used.
    assert items["retention.md#0"].ground_truth.startswith("RouteWise API request logs are retained for 90 days")


def test_quantity_questions_blank_the_value_they_ask_for():
    chunks, clusters = _frames()
    items = {i.gold_chunk_ids[0]: i for i in generate_offline(chunks, clusters, TITLES, max_items=40)}

    item = items["travel.md#0"]
    assert item.template == "quantity"
    assert "14 days" in item.ground_truth
    assert "14 days" not in item.question and "____" in item.question
    assert "Travel Policy" in item.question  # names the document it asks about


def test_qa_ids_are_stable_across_runs_and_unaffected_by_other_chunks():
    chunks, clusters = _frames()
    first = generate_offline(chunks, clusters, TITLES, max_items=40)
    second = generate_offline(chunks.copy(), clusters.copy(), dict(TITLES), max_items=40)

    extra = dict(CHUNKS)
    extra["new.md#0"] = ("new.md", "New", 3, 1.0, "The new loading dock in Venlo opens at 06:00 on every working day.")
    third = generate_offline(*_frames(extra), {**TITLES, "new.md": "New Dock"}, max_items=40)

    assert [i.qa_id for i in first] == [i.qa_id for i in second]
    assert [i.question for i in first] == [i.question for i in second]
    ids_by_chunk = {i.gold_chunk_ids[0]: i.qa_id for i in first}
    for item in third:
        if item.gold_chunk_ids[0] in ids_by_chunk:
            assert item.qa_id == ids_by_chunk[item.gold_chunk_ids[0]]
    assert len({i.qa_id for i in first}) == len(first)


def test_clusters_are_visited_round_robin():
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, TITLES, max_items=3)

    # Cluster 0 has four chunks and comes first, yet the first three items cover all three clusters.
    assert sorted(i.source_cluster for i in items) == [0, 1, 2]
    # Within a cluster, the chunk with the strongest membership goes first.
    assert items[0].gold_chunk_ids == ["retention.md#0"]


def test_round_robin_order_over_a_full_run():
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, TITLES, max_items=40)

    # Largest cluster first; then each cluster in turn until its queue is empty.
    assert [i.source_cluster for i in items] == [0, 1, 2, 0, 1, 0, 0]
    cluster0 = [i.gold_chunk_ids[0] for i in items if i.source_cluster == 0]
    assert cluster0 == ["retention.md#0", "retention.md#1", "retention.md#2", "retention.md#3"]


@pytest.mark.parametrize("max_items", [0, 1, 2, 5])
def test_max_items_is_respected(max_items):
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, TITLES, max_items=max_items)

    assert len(items) == max_items


def test_chunks_without_a_factual_sentence_give_no_item():
    assert question_for_chunk({"chunk_id": "x#0", "text": "Short. Too short. Yes.", "cluster_id": 0}, "T") is None
    # A long sentence without a final full stop is not a checkable fact either.
    assert question_for_chunk(
        {"chunk_id": "x#1", "text": "Which of the eight warehouses in the region handle frozen goods today?", "cluster_id": 0},
        "T",
    ) is None

    chunks, clusters = _frames({
        "a.md#0": ("a.md", "A", 0, 1.0, "Short. Too short."),
        "a.md#1": ("a.md", "B", 0, 0.5, "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday."),
    })
    items = generate_offline(chunks, clusters, {"a.md": "A"}, max_items=5)
    assert [i.gold_chunk_ids for i in items] == [["a.md#1"]]


def test_title_falls_back_to_doc_id():
    chunks, clusters = _frames()

    items = generate_offline(chunks, clusters, {}, max_items=40)

    quantity = [i for i in items if i.template == "quantity"]
    assert quantity
    for item in quantity:
        assert f'"{item.gold_chunk_ids[0].split("#")[0]}"' in item.question


def test_items_frame_has_one_row_per_item_and_drops_extra():
    chunks, clusters = _frames()
    items = generate_offline(chunks, clusters, TITLES, max_items=40)

    frame = items_frame(items)

    assert len(frame) == len(items)
    assert "extra" not in frame.columns
    assert set(frame.columns) == set(QAItem.__dataclass_fields__) - {"extra"}
    assert frame["qa_id"].tolist() == [i.qa_id for i in items]
    assert items_frame([]).empty and "qa_id" in items_frame([]).columns
