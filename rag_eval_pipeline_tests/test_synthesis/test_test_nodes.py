"""Test nodes: which chunks questions are written from, in which order, and the clusters' labels."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.synthesis import pipeline
from rag_eval_pipeline.synthesis.clustering import cluster_labels
from rag_eval_pipeline.synthesis.test_nodes import factual_sentences, information_score, rank_test_nodes

NO_FACT = "Short. Too short. Yes."
QUESTION_ONLY = "Which of the eight warehouses in the region handle frozen goods today?"  # no full stop: no fact


def _frames(rows: list[tuple[str, int, float, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """rows: (chunk_id '<doc>#<n>', cluster_id, membership, text) -> (chunks, clusters)."""
    chunks = pd.DataFrame(
        [
            {"chunk_id": c, "doc_id": c.split("#")[0], "position": int(c.split("#")[1]), "heading": "", "text": t}
            for c, _, _, t in rows
        ]
    )
    clusters = pd.DataFrame(
        [{"chunk_id": c, "cluster_id": k, "is_outlier": k == -1, "membership": m} for c, k, m, _ in rows]
    )
    return chunks, clusters


# --- information_score ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [NO_FACT, QUESTION_ONLY, "", "Tiny words here.", "# Heading only"])
def test_information_is_zero_without_a_factual_sentence(text):
    assert factual_sentences(text) == []
    assert information_score(text) == 0.0


def test_information_is_positive_for_a_factual_sentence_and_rewards_numbers_and_names():
    plain = "The shift lasts exactly one week and then the next engineer takes over the pager."
    checkable = "The shift lasts exactly 7 days and then Priya Nandakumar takes over the Klaxon pager."

    assert information_score(plain) > 0
    # Same shape, but numbers and names to check: scored higher.
    assert information_score(checkable) > information_score(plain)


def test_a_non_factual_sentence_beside_a_fact_does_not_zero_the_chunk():
    text = f"{NO_FACT} Database backups of the shipment system are kept for 35 days in a separate region."

    assert factual_sentences(text) == [
        "Database backups of the shipment system are kept for 35 days in a separate region."
    ]
    assert information_score(text) > 0


# --- rank_test_nodes --------------------------------------------------------------------------------

# Memberships are spread (1.0 / 0.6 / 0.3 / 0.0 scale the score by 1.0 / 0.8 / 0.65 / 0.5), so within a
# cluster the order of node scores is the order of the memberships for these sentences of similar density.
ROWS = [
    # cluster 0: four factual chunks, three in a.md and the weakest is the only chunk of c.md
    ("a.md#0", 0, 1.0, "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday."),
    (
        "a.md#1",
        0,
        0.6,
        "RouteWise API request logs are retained for 90 days and then deleted automatically by Sweeper.",
    ),
    ("a.md#2", 0, 0.3, "Database backups of the shipment system are kept for 35 days in a separate region."),
    ("c.md#0", 0, 0.0, "The shift lasts exactly one week and then the next engineer takes over the pager."),
    ("a.md#3", 0, 1.0, NO_FACT),
    # cluster 1: two factual chunks and a question without a fact
    ("b.md#0", 1, 1.0, "Flights must be booked at least 14 days before departure unless the trip is urgent."),
    ("b.md#1", 1, 0.3, "The archive bucket stores closed contracts for ten years under a legal hold."),
    ("b.md#2", 1, 1.0, QUESTION_ONLY),
    # an outlier: HDBSCAN gives it membership 0, but as a group of its own it is not penalised for it
    ("d.md#0", -1, 0.0, "The hotel cap is EUR 230 per night in London, Paris, New York, Zurich and Singapore."),
]


@pytest.fixture
def ranked() -> pd.DataFrame:
    return rank_test_nodes(*_frames(ROWS)).set_index("chunk_id")


def test_ranking_covers_clusters_then_documents_then_takes_turns(ranked):
    order = ranked[ranked["test_node_rank"] > 0].sort_values("test_node_rank").index.tolist()

    assert order == [
        # 1. the best chunk of every cluster, largest cluster first (cluster 0: 4, cluster 1: 2, outliers: 1)
        "a.md#0",
        "b.md#0",
        "d.md#0",
        # 2. c.md is not covered yet: its best (and weakest overall) chunk comes before the rest of cluster 0
        "c.md#0",
        # 3. the rest take turns across clusters, best first within each
        "a.md#1",
        "b.md#1",
        "a.md#2",
    ]
    assert sorted(ranked.loc[order, "test_node_rank"]) == list(range(1, len(order) + 1))


def test_chunks_without_a_fact_are_not_test_nodes(ranked):
    for chunk_id in ("a.md#3", "b.md#2"):
        assert ranked.loc[chunk_id, "test_node_rank"] == 0
        assert ranked.loc[chunk_id, "information"] == 0.0
    assert (ranked.drop(["a.md#3", "b.md#2"])["information"] > 0).all()


def test_outliers_count_as_fully_central(ranked):
    assert ranked.loc["d.md#0", "centrality"] == 1.0
    assert ranked.loc["b.md#1", "centrality"] == 0.3  # members keep their membership
    assert list(ranked.reset_index().columns) == ["chunk_id", "information", "centrality", "test_node_rank"]


def test_every_document_with_a_fact_gets_a_test_node_early():
    # Ten chunks of one document outscore the single chunk of another document in the same cluster.
    rows = [
        (
            f"big.md#{i}",
            0,
            1.0,
            f"Shipment batch {i} of Halcyon Freight leaves the Venlo dock at {i + 6}:00 every weekday.",
        )
        for i in range(10)
    ]
    rows.append(
        ("small.md#0", 0, 0.0, "The shift lasts exactly one week and then the next engineer takes over the pager.")
    )

    ranked = rank_test_nodes(*_frames(rows)).set_index("chunk_id")

    # By score alone it would come last: the lowest information at half weight (membership 0).
    assert ranked.loc["small.md#0", "information"] * 0.5 < ranked["information"].drop("small.md#0").min()
    assert ranked.loc["small.md#0", "test_node_rank"] == 2  # right after the cluster's best chunk


def test_no_eligible_chunk_gives_all_zero_ranks():
    ranked = rank_test_nodes(*_frames([("a.md#0", 0, 1.0, NO_FACT), ("a.md#1", 0, 1.0, QUESTION_ONLY)]))

    assert ranked["test_node_rank"].tolist() == [0, 0]


# --- cluster labels ---------------------------------------------------------------------------------


# "company" is in every text, more often than any other word: frequent, but distinctive of no cluster.
CLAIMS = [
    "Company staff file freight claims at the company desk.",
    "Company rules say freight claims need a company form.",
]
HOTELS = [
    "Company visitors book a hotel below the company cap.",
    "The company pays the hotel when company guests stay.",
]
FORKLIFTS = [
    "Company drivers take the forklift test at the company yard.",
    "Company rules: the forklift needs a company licence.",
]


def test_cluster_labels_lead_with_terms_distinctive_of_each_cluster():
    labels = cluster_labels(CLAIMS + HOTELS + FORKLIFTS, [3, 3, 7, 7, -1, -1])

    assert set(labels) == {3, 7, -1}  # outliers get a label of their own
    first = {cluster: label.split(", ")[0] for cluster, label in labels.items()}
    assert first[3] in ("freight", "claims", "freight claims")
    assert first[7] == "hotel"
    assert first[-1] == "forklift"
    for label, texts in ((labels[3], CLAIMS), (labels[7], HOTELS), (labels[-1], FORKLIFTS)):
        terms = label.split(", ")
        assert len(terms) == 3
        assert all(term in " ".join(texts).lower() for term in terms)  # every term from the cluster's own texts


def test_cluster_label_terms_do_not_repeat_words():
    labels = cluster_labels(CLAIMS + HOTELS + FORKLIFTS, [0, 0, 1, 1, 2, 2], n_terms=4)

    for label in labels.values():
        words = " ".join(label.split(", ")).split()
        assert len(words) == len(set(words)), label  # not "freight" and "freight claims" both


def test_cluster_labels_of_text_without_terms_are_empty():
    assert cluster_labels(["It is so.", "123 456."], [0, 1]) == {0: "", 1: ""}
    assert cluster_labels([], []) == {}


# --- the test_nodes step ----------------------------------------------------------------------------


def test_test_nodes_step_adds_cluster_label_and_rank_to_every_chunk(embedder):
    rows = [(c, 0, 1.0, t) for c, _, _, t in ROWS]
    chunks, _ = _frames(rows)

    nodes = pipeline.test_nodes(chunks, embedder).set_index("chunk_id")

    assert sorted(nodes.index) == sorted(chunks["chunk_id"])
    assert {"cluster_id", "cluster_label", "membership", "information", "test_node_rank"} <= set(nodes.columns)
    assert nodes.loc[["a.md#3", "b.md#2"], "test_node_rank"].tolist() == [0, 0]
    assert sorted(nodes.loc[nodes["test_node_rank"] > 0, "test_node_rank"]) == list(range(1, 8))
    assert nodes["cluster_label"].map(lambda s: isinstance(s, str)).all()
    assert (nodes.loc[nodes["cluster_id"] >= 0, "cluster_label"] != "").all()
