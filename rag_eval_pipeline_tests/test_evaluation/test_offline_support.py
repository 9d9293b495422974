"""assess_support: one hand-written case per signal, and regression guards on labelled right/hallucinated pairs:
our own pairs (hallucination_pairs.py) always, the public HaluEval set where ../shared is present."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import pytest

from rag_eval_pipeline.core.judging.offline_support import SIGNALS, SupportAssessment, assess_support
from rag_eval_pipeline_tests import hallucination_pairs

ORCHARD = (
    "The Millbrook orchard was planted by Teodora Vance in 1932. She grew twelve varieties of pear there. "
    "The orchard is not open to visitors on Mondays."
)
HARBOUR = "Port Keller handles 4,500 containers a week. Its harbour master is Anselm Dorrit."
REPO = Path(__file__).resolve().parents[2]
HALUEVAL = REPO.parent / "shared" / "benchmarks" / "halueval_qa_dev.jsonl"


def test_copied_statement_is_supported_with_full_score():
    found = assess_support("The Millbrook orchard was planted by Teodora Vance in 1932.", [HARBOUR, ORCHARD])
    assert isinstance(found, SupportAssessment)
    assert found.supported and found.score == 1.0 and found.context_index == 1


def test_changed_number_is_unsupported():
    found = assess_support("The Millbrook orchard was planted by Teodora Vance in 1938.", [ORCHARD])
    assert not found.supported and found.score < 0.5
    assert "1938" in found.note


def test_changed_number_word_is_unsupported():
    assert not assess_support("Teodora Vance grew fifteen varieties of pear.", [ORCHARD]).supported
    assert assess_support("She grew 12 varieties of pear.", [ORCHARD]).supported


def test_swapped_entity_is_unsupported_and_named():
    found = assess_support("The Millbrook orchard was planted by Teodora Marsh in 1932.", [ORCHARD])
    assert not found.supported
    assert found.note == "entity not in context: 'Teodora Marsh'"


def test_added_negation_is_unsupported():
    found = assess_support("The Millbrook orchard was not planted by Teodora Vance.", [ORCHARD])
    assert not found.supported and "negation" in found.note


def test_dropped_negation_is_unsupported():
    found = assess_support("The orchard is open to visitors on Mondays.", [ORCHARD])
    assert not found.supported and "negates" in found.note


def test_capitalised_never_in_a_name_is_not_a_negation():
    context = "The festival closed with sets by Cold Harbour and Never Say Never."
    assert assess_support("Never Say Never", [context], "Which band closed the festival?").supported


def test_words_stitched_from_unrelated_sentences_are_unsupported():
    context = (
        "Anselm Dorrit trained as a pilot in Rotterdam. The museum opened a new wing in spring. "
        "Visitors praised the wing's lighting."
    )
    found = assess_support("Anselm Dorrit opened a new wing.", [context])
    assert not found.supported and "one place" in found.note


def test_a_pronoun_carries_the_subject_into_the_next_sentence():
    assert assess_support("Teodora Vance grew twelve varieties of pear.", [ORCHARD]).supported


def test_bare_entity_answer_found_in_context_is_supported():
    found = assess_support("Anselm Dorrit", [ORCHARD, HARBOUR], question="Who is the harbour master of Port Keller?")
    assert found.supported and found.context_index == 1


def test_bare_entity_answer_absent_from_context_is_unsupported():
    found = assess_support("Piet Hagen", [HARBOUR], question="Who is the harbour master of Port Keller?")
    assert not found.supported and "Piet Hagen" in found.note


def test_words_added_beyond_the_question_must_be_grounded():
    question = "Who planted the Millbrook orchard?"
    assert assess_support("Teodora Vance planted it", [ORCHARD], question).supported
    found = assess_support("a retired sailor planted it", [ORCHARD], question)
    assert not found.supported and "sailor" in found.note


def test_bare_yes_is_checked_against_the_question():
    assert assess_support("yes", [ORCHARD], "Did Teodora Vance plant the Millbrook orchard?").supported
    assert not assess_support("yes", [ORCHARD], "Did Corwin Hale plant the Millbrook orchard?").supported
    assert not assess_support("yes", [ORCHARD]).supported


def test_empty_contexts_are_unsupported():
    for contexts in ([], [""], ["   "]):
        found = assess_support("Port Keller handles 4,500 containers a week.", contexts)
        assert found == SupportAssessment(False, 0.0, None, "no context")


def test_glued_sentences_and_possessives_are_split():
    context = "The pier was rebuilt in 1990.Anselm Dorrit's office overlooks it."
    assert assess_support("Anselm Dorrit", [context], "Whose office overlooks the pier?").supported


def test_deterministic_and_score_agrees_with_verdict():
    cases = [
        ("Port Keller handles 4,500 containers a week.", [HARBOUR]),
        ("Port Keller handles 9,000 containers a week.", [HARBOUR]),
        ("The harbour master is Anselm Dorrit.", [ORCHARD, HARBOUR]),
    ]
    for statement, contexts in cases:
        first, second = assess_support(statement, contexts), assess_support(statement, contexts)
        assert first == second
        assert 0.0 <= first.score <= 1.0 and (first.score >= 0.5) == first.supported


def test_every_signal_can_be_switched_off():
    statement = "The Millbrook orchard was planted by Teodora Vance in 1938."
    assert not assess_support(statement, [ORCHARD]).supported
    assert assess_support(statement, [ORCHARD], disabled=frozenset({"numbers"})).supported
    assert set(SIGNALS) >= {"numbers", "entities", "negation", "relation"}


def _pairwise_faithfulness(records: list[dict]) -> float:
    spec = importlib.util.spec_from_file_location("judge_accuracy", REPO / "benchmarks" / "judge_accuracy.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    faithfulness, _ = bench.score_records(records, bench.judge_v2)
    return bench.pairwise_agreement(records, faithfulness)


# Pairwise agreement per kind of hallucination on our own pairs, as measured: a bare yes/no has its polarity
# unchecked and a wrong entity that the knowledge names is found in it, so those pairs tie (0.5) by design; two
# right answers that join two sentences of the knowledge ("... not allowed on board" about "the Marigold")
# are judged unsupported. A floor of 0.5 still fails a judge that prefers the hallucinated answer.
OWN_PAIR_FLOORS = {
    "entity": 1.0,
    "number": 1.0,
    "added_claim": 1.0,
    "negation": 0.75,
    "yes_no": 0.5,
    "other_entity": 0.5,
}


def test_own_hallucination_pairs_agreement_does_not_regress():
    records = hallucination_pairs.records()
    assert {r["meta"]["kind"] for r in records} == set(OWN_PAIR_FLOORS)

    assert _pairwise_faithfulness(records) >= 0.838  # measured 0.839 (31 pairs)
    for kind, floor in OWN_PAIR_FLOORS.items():
        of_kind = [r for r in records if r["meta"]["kind"] == kind]
        assert _pairwise_faithfulness(of_kind) >= floor, kind


@pytest.mark.corpus
@pytest.mark.skipif(not HALUEVAL.exists(), reason="needs ../shared/benchmarks/halueval_qa_dev.jsonl")
def test_halueval_pairwise_agreement_does_not_regress():
    records = [json.loads(line) for line in HALUEVAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_half = defaultdict(list)
    for record in records:
        by_half[hashlib.sha256(record["pair_id"].encode()).digest()[0] % 2].append(record)
    assert _pairwise_faithfulness(records) >= 0.955  # measured 0.960
    assert _pairwise_faithfulness(by_half[1]) >= 0.94  # held-out half, measured 0.948
