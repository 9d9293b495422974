"""Planning: how many items of each type, and the candidate tasks each type is written from."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.synthesis.items import MULTI_CONTEXT, QUESTION_TYPES, REASONING, SIMPLE, UNANSWERABLE
from rag_eval_pipeline.synthesis.planning import (
    DEFAULT_MIX,
    TypePlan,
    candidate_tasks,
    key_terms,
    plan_counts,
    topic_terms,
)

OFFLINE_TYPES = (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)


def _by_type(plans: list[TypePlan]) -> dict[str, TypePlan]:
    return {p.question_type: p for p in plans}


# --- plan_counts ------------------------------------------------------------------------------------


def test_largest_remainder_split_breaks_ties_in_type_order():
    plans = _by_type(plan_counts(5, {SIMPLE: 1, MULTI_CONTEXT: 1, UNANSWERABLE: 1}, QUESTION_TYPES))

    # 5/3 each: 1 + 1 + 1 and two left over, which go to the first types in QUESTION_TYPES order.
    assert [plans[t].planned for t in (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)] == [2, 2, 1]
    assert [plans[t].requested for t in (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)] == [2, 2, 1]


def test_largest_remainder_goes_to_the_largest_fraction():
    plans = _by_type(plan_counts(10, {SIMPLE: 3, MULTI_CONTEXT: 2, UNANSWERABLE: 2}, QUESTION_TYPES))

    # exact shares 4.29 / 2.86 / 2.86: floors 4 / 2 / 2, the two left over go to the .86 remainders
    assert [plans[t].planned for t in (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)] == [4, 3, 3]


@pytest.mark.parametrize(
    "mix",
    [
        DEFAULT_MIX,
        {SIMPLE: 1.0},
        {SIMPLE: 0.7, UNANSWERABLE: 0.3},
        {SIMPLE: 1, REASONING: 1, MULTI_CONTEXT: 1, UNANSWERABLE: 1},
        {SIMPLE: 0.33, MULTI_CONTEXT: 0.33, UNANSWERABLE: 0.34},
    ],
)
@pytest.mark.parametrize("supported", [QUESTION_TYPES, OFFLINE_TYPES])
def test_counts_sum_to_n_and_stay_within_one_of_the_exact_share(mix, supported):
    for n in range(1, 41):
        plans = plan_counts(n, mix, supported)
        assert [p.question_type for p in plans] == [t for t in QUESTION_TYPES if t in mix]
        assert sum(p.requested for p in plans) == n
        total = sum(mix.values())
        for plan in plans:
            assert abs(plan.requested - n * mix[plan.question_type] / total) < 1
        if any(t in supported for t in mix):
            assert sum(p.planned for p in plans) == n
        assert all(p.planned == 0 for p in plans if p.question_type not in supported)


def test_an_unsupported_type_gives_its_share_to_the_others_with_a_note():
    plans = _by_type(plan_counts(10, DEFAULT_MIX, OFFLINE_TYPES))

    assert plans[REASONING].requested == 2
    assert plans[REASONING].planned == 0
    assert "cannot write" in plans[REASONING].note
    # The 10 go to the other three in proportion 0.4 : 0.25 : 0.15 (5, 3.125, 1.875 -> 5, 3, 2).
    assert [plans[t].planned for t in OFFLINE_TYPES] == [5, 3, 2]
    for t in OFFLINE_TYPES:
        assert plans[t].planned >= plans[t].requested
        assert plans[t].note == ""


def test_no_note_for_an_unsupported_type_that_was_not_asked_for():
    plans = _by_type(plan_counts(10, {SIMPLE: 1, REASONING: 0}, OFFLINE_TYPES))

    assert (plans[REASONING].requested, plans[REASONING].planned, plans[REASONING].note) == (0, 0, "")
    assert plans[SIMPLE].planned == 10


def test_only_unsupported_types_plan_nothing_and_say_why():
    plans = plan_counts(4, {REASONING: 1}, OFFLINE_TYPES)

    assert [(p.question_type, p.requested, p.planned) for p in plans] == [(REASONING, 4, 0)]
    assert plans[0].note


@pytest.mark.parametrize(
    "n, mix, message",
    [
        (10, {"simple": 1, "trivia": 1}, "unknown question types ['trivia']"),
        (10, {"simple": 1, "unanswerable": -0.5}, "non-negative weights"),
        (10, {"simple": 0, "unanswerable": 0}, "positive sum"),
        (10, {}, "positive sum"),
        (0, DEFAULT_MIX, "at least 1"),
        (-3, DEFAULT_MIX, "at least 1"),
    ],
)
def test_bad_plans_are_value_errors(n, mix, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plan_counts(n, mix, QUESTION_TYPES)


# --- key terms --------------------------------------------------------------------------------------


def test_topic_terms_are_adjacent_content_word_pairs_without_numbers():
    terms = topic_terms("Customer Shipment Data is retained for 24 months at the loading dock.")

    # "Data is retained": a stop word between them breaks the pair; "24 months" holds a number.
    assert terms == ["customer shipment", "shipment data", "load dock"]


def test_key_terms_come_from_factual_sentences_only():
    assert key_terms("Loading dock. Short.") == set()
    assert "load dock" in key_terms("Every loading dock at the Venlo site is inspected before the first shift.")


# --- candidate tasks --------------------------------------------------------------------------------

# All chunks of cluster 0 except w.md#0; every one but z.md#0 says something about a "loading dock".
DOCKS = {
    "x.md#0": (0, "Every loading dock at the Venlo site is inspected by the site manager before the first shift."),
    # x.md#1 is x.md#0's neighbour and shares the most terms with it ("loading dock", "site manager")
    "x.md#1": (0, "The site manager closes a loading dock when the dock door traffic light is broken."),
    # x.md#3 shares two terms with x.md#0 as well, y.md#0 only one
    "x.md#3": (0, "Trucks wait in the yard until a loading dock is free and the site manager calls the driver."),
    "y.md#0": (0, "Each loading dock of the Kassel warehouse has a dock leveller that is serviced every spring."),
    # "dock" and "loading" but not as one term: a shared word is not a shared topic
    "z.md#0": (0, "The dock is closed while the loading of frozen goods takes place during the night shift."),
    "w.md#0": (1, "A loading dock in the Rotterdam port terminal is rented by the hour from the port authority."),
    "x.md#5": (0, "Short. Yes."),  # no factual sentence: not a test node
}
RANKS = {"x.md#0": 1, "y.md#0": 2, "x.md#1": 3, "x.md#3": 4, "z.md#0": 5, "w.md#0": 6, "x.md#5": 0}
TITLES = {"x.md": "Venlo Site Handbook", "y.md": "Kassel Warehouse Guide", "w.md": "Rotterdam Terminal Rules"}


def _frames(chunks: dict = DOCKS) -> tuple[pd.DataFrame, pd.DataFrame]:
    chunk_frame = pd.DataFrame(
        [
            {
                "chunk_id": c,
                "doc_id": c.split("#")[0],
                "position": int(c.split("#")[1]),
                "heading": f"Section {c[-1]}",
                "text": t,
            }
            for c, (_, t) in chunks.items()
        ]
    )
    nodes = pd.DataFrame(
        [
            {"chunk_id": c, "cluster_id": k, "cluster_label": f"label {k}", "test_node_rank": RANKS[c]}
            for c, (k, _) in chunks.items()
        ]
    )
    return chunk_frame, nodes


def _pairs(chunks: dict = DOCKS) -> list[tuple[str, str]]:
    tasks = candidate_tasks(*_frames(chunks), TITLES, [TypePlan(MULTI_CONTEXT, 3, 3)])[MULTI_CONTEXT]
    for task in tasks:
        assert task.question_type == MULTI_CONTEXT and len(task.chunks) == 2
    return [tuple(c.chunk_id for c in task.chunks) for task in tasks]


def test_multi_context_partner_is_from_another_document_first():
    pairs = _pairs()

    # x.md#0 shares two terms with x.md#3 but only one with y.md#0: another document wins.
    assert pairs[0] == ("x.md#0", "y.md#0")
    for a, b in pairs:
        assert a.split("#")[0] != b.split("#")[0]  # a partner from another document exists for each here


def test_multi_context_never_pairs_neighbours_of_one_document():
    without_other_documents = {c: v for c, v in DOCKS.items() if not c.startswith("y.md")}

    pairs = _pairs(without_other_documents)

    assert pairs[0] == ("x.md#0", "x.md#3")  # not x.md#1, its neighbour, though it shares more
    assert {frozenset(p) for p in pairs} == {frozenset(("x.md#0", "x.md#3")), frozenset(("x.md#1", "x.md#3"))}
    for a, b in pairs:
        assert abs(int(a[-1]) - int(b[-1])) > 1


def test_multi_context_needs_a_shared_two_word_term_in_the_same_cluster():
    pairs = _pairs()
    paired = {c for p in pairs for c in p}

    assert "z.md#0" not in paired  # shares only single words
    assert "w.md#0" not in paired  # shares "loading dock", but is in another cluster
    assert "x.md#5" not in paired
    assert len({frozenset(p) for p in pairs}) == len(pairs)  # each pair once


def test_multi_context_without_any_partner_gives_no_task():
    lonely = {c: DOCKS[c] for c in ("x.md#0", "x.md#1", "z.md#0", "w.md#0")}

    assert _pairs(lonely) == []


def test_types_start_at_different_points_of_the_ranking():
    plans = [
        TypePlan(SIMPLE, 2, 2),
        TypePlan(REASONING, 1, 0),
        TypePlan(MULTI_CONTEXT, 1, 1),
        TypePlan(UNANSWERABLE, 2, 2),
    ]

    tasks = candidate_tasks(*_frames(), TITLES, plans)

    ranked = sorted((r, c) for c, r in RANKS.items() if r > 0)
    ranked = [c for _, c in ranked]
    first = {t: [task.chunks[0].chunk_id for task in tasks[t]] for t in (SIMPLE, REASONING, UNANSWERABLE)}
    # simple starts at rank 1; reasoning (0 planned) and multi_context after simple's 2; unanswerable after 3
    assert first[SIMPLE] == ranked
    assert first[REASONING] == ranked[2:] + ranked[:2]
    assert first[UNANSWERABLE] == ranked[3:] + ranked[:3]
    assert tasks[MULTI_CONTEXT][0].chunks[0].chunk_id == ranked[2]  # x.md#1 (paired with y.md#0)


def test_tasks_carry_titles_headings_clusters_and_labels():
    tasks = candidate_tasks(*_frames(), {"x.md": "Venlo Site Handbook"}, [TypePlan(SIMPLE, 1, 1)])[SIMPLE]

    by_chunk = {t.chunks[0].chunk_id: t for t in tasks}
    x0, w0 = by_chunk["x.md#0"], by_chunk["w.md#0"]
    assert x0.chunks[0].title == "Venlo Site Handbook"
    assert w0.chunks[0].title == "w.md"  # no title: the doc id stands in
    assert (x0.cluster_id, x0.cluster_label, x0.chunks[0].heading) == (0, "label 0", "Section 0")
    assert (w0.cluster_id, w0.cluster_label) == (1, "label 1")
    assert x0.chunks[0].text == DOCKS["x.md#0"][1]
    assert "x.md#5" not in by_chunk


def test_no_test_nodes_give_empty_candidate_lists():
    chunks, nodes = _frames()
    nodes["test_node_rank"] = 0

    tasks = candidate_tasks(chunks, nodes, TITLES, plan_counts(6, DEFAULT_MIX, OFFLINE_TYPES))

    assert tasks and all(v == [] for v in tasks.values())
