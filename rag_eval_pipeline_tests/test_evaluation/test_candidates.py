"""Running candidates: failures stay per item; entry points and outputs files fail with clear errors."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from rag_eval_pipeline.core.retrieval import ReferenceCandidate
from rag_eval_pipeline.core.text import split_sentences
from rag_eval_pipeline.evaluation.candidates import (
    FAILED,
    OK,
    CandidateError,
    CandidateSpec,
    load_entry_point,
    outputs_from_text,
    outputs_text,
    run_candidate,
    validate_output,
)

ITEMS = [
    {"qa_id": "good-1", "question": "good: how long are logs kept?"},
    {"qa_id": "raises", "question": "raise"},
    {"qa_id": "hangs", "question": "hang"},
    {"qa_id": "not-a-dict", "question": "string"},
    {"qa_id": "bad-contexts", "question": "contexts"},
    {"qa_id": "good-2", "question": "good: who owns the policy?"},
]


def flaky_candidate(question: str) -> dict:
    if question == "raise":
        raise RuntimeError("index offline")
    if question == "hang":
        time.sleep(120)  # far beyond any bound below: a test that waited for it would take minutes
        return {"answer": "too late", "contexts": []}
    if question == "string":
        return "just an answer"
    if question == "contexts":
        return {"answer": "x", "contexts": [{"id": "a#0"}]}  # a context without text
    return {
        "answer": f"answer to {question}",
        "contexts": [{"id": 7, "text": "first"}, {"id": "b#1", "text": "second"}],
    }


def test_run_candidate_records_failures_per_item_and_goes_on():
    started = time.perf_counter()
    outputs = run_candidate(flaky_candidate, ITEMS, timeout_s=0.2)
    elapsed = time.perf_counter() - started

    assert elapsed < 60, "a hanging candidate must be abandoned at the timeout, not waited for"
    assert [o.qa_id for o in outputs] == [i["qa_id"] for i in ITEMS]
    by_id = {o.qa_id: o for o in outputs}
    assert {qa_id for qa_id, o in by_id.items() if o.status == OK} == {"good-1", "good-2"}

    assert by_id["raises"].status == FAILED
    assert "RuntimeError" in by_id["raises"].error and "index offline" in by_id["raises"].error
    assert by_id["hangs"].status == FAILED and "timed out after 0.2 s" in by_id["hangs"].error
    assert 0.2 <= by_id["hangs"].latency_s < 60
    assert by_id["not-a-dict"].status == FAILED and "malformed output" in by_id["not-a-dict"].error
    assert "str" in by_id["not-a-dict"].error
    assert by_id["bad-contexts"].status == FAILED and "rank 0" in by_id["bad-contexts"].error
    for failed in ("raises", "hangs", "not-a-dict", "bad-contexts"):
        assert by_id[failed].answer == "" and by_id[failed].contexts == []

    good = by_id["good-1"]
    assert good.error == ""
    assert good.answer == "answer to good: how long are logs kept?"
    assert good.contexts == [{"id": "7", "text": "first"}, {"id": "b#1", "text": "second"}]  # ids as strings, rank kept
    assert good.latency_s >= 0


def test_a_candidate_that_exits_does_not_end_the_run():
    def exits(question):
        raise SystemExit(3)

    outputs = run_candidate(exits, ITEMS[:2], timeout_s=1)

    assert [o.status for o in outputs] == [FAILED, FAILED]
    assert "SystemExit" in outputs[0].error


@pytest.mark.parametrize(
    "raw, message",
    [
        (None, "NoneType"),
        ({"contexts": []}, "'answer' must be a string"),
        ({"answer": 3}, "'answer' must be a string"),
        ({"answer": "a", "contexts": "c"}, "'contexts' must be a list"),
        ({"answer": "a", "contexts": ["text"]}, "rank 0"),
        ({"answer": "a", "contexts": [{"id": "x", "text": "ok"}, {"id": "y", "text": None}]}, "rank 1"),
    ],
)
def test_validate_output_says_what_is_wrong(raw, message):
    with pytest.raises(ValueError, match=message):
        validate_output(raw)


def test_validate_output_defaults_missing_contexts_and_ids():
    assert validate_output({"answer": "a"}) == ("a", [])
    assert validate_output({"answer": "a", "contexts": [{"text": "t"}]}) == ("a", [{"id": "", "text": "t"}])


# --- candidate specs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("reference", "reference", ""),
        ("runs/outputs.jsonl", "outputs_file", "runs/outputs.jsonl"),
        ("my_rag.pipeline:answer", "entry_point", "my_rag.pipeline:answer"),
        ("os:path.join", "entry_point", "os:path.join"),
    ],
)
def test_a_spec_parses_each_kind_and_its_text_reads_back(text, kind, value):
    spec = CandidateSpec.parse(text)

    assert (spec.kind, spec.value) == (kind, value)
    assert str(spec) == text and CandidateSpec.parse(str(spec)) == spec


@pytest.mark.parametrize("text", ["", "no colon", "json", "answers.csv", "pkg:", ":fn", "a b:c", None])
def test_a_bad_spec_is_one_line_naming_the_accepted_forms(text):
    with pytest.raises(CandidateError) as error:
        CandidateSpec.parse(text)

    message = str(error.value)
    assert "\n" not in message and repr(text) in message
    assert "'reference', 'package.module:function' or a path to a .jsonl outputs file" in message


def test_a_spec_checks_its_value_whichever_way_it_is_made():
    with pytest.raises(CandidateError, match="invalid outputs 'a.csv'"):
        CandidateSpec("outputs_file", "a.csv")
    with pytest.raises(CandidateError, match="unknown candidate kind 'script'"):
        CandidateSpec("script", "x.py")
    with pytest.raises(CandidateError, match="takes no value"):
        CandidateSpec("reference", "x")
    assert CandidateSpec.entry("reference") == CandidateSpec("reference")
    with pytest.raises(CandidateError, match="invalid entry 'out.jsonl'"):  # an entry never names a file
        CandidateSpec.entry("out.jsonl")


def test_only_entry_points_are_held_to_the_allow_list(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "my_rag")

    assert CandidateSpec.parse("my_rag.v2:answer").require_allowed().value == "my_rag.v2:answer"
    assert CandidateSpec.parse("reference").require_allowed() == CandidateSpec("reference")
    with pytest.raises(CandidateError, match="not in an allowed package"):
        CandidateSpec.parse("os:system").require_allowed()


def test_load_entry_point_takes_a_spec():
    assert load_entry_point(CandidateSpec.parse("json:dumps")) is json.dumps
    with pytest.raises(CandidateError, match="not an entry point"):
        load_entry_point(CandidateSpec("reference"))


# --- entry points ----------------------------------------------------------------------------


def test_load_entry_point_returns_the_callable():
    assert load_entry_point("json:dumps") is json.dumps
    assert load_entry_point("os:path.join") is os.path.join  # dotted attribute path


@pytest.mark.parametrize("spec", ["json", "json:", ":dumps", ""])
def test_load_entry_point_rejects_a_malformed_spec(spec):
    with pytest.raises(CandidateError, match="must look like 'package.module:function'"):
        load_entry_point(spec)


def test_load_entry_point_reports_a_missing_module():
    with pytest.raises(CandidateError, match="cannot import candidate module 'no_such_candidate_pkg_xyz'"):
        load_entry_point("no_such_candidate_pkg_xyz:answer")


def test_load_entry_point_reports_a_module_that_fails_to_import(tmp_path, monkeypatch):
    (tmp_path / "broken_candidate_mod.py").write_text("raise ImportError('needs a GPU')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(CandidateError, match="needs a GPU"):
        load_entry_point("broken_candidate_mod:answer")


def test_load_entry_point_reports_a_missing_attribute():
    with pytest.raises(CandidateError, match="has no attribute 'no_such_function'"):
        load_entry_point("json:no_such_function")


def test_load_entry_point_reports_a_value_that_is_not_callable():
    with pytest.raises(CandidateError, match="not callable"):
        load_entry_point("math:pi")


# --- outputs files ---------------------------------------------------------------------------


def _write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_outputs_file_with_invalid_json_names_the_line(tmp_path):
    path = _write_lines(
        tmp_path / "out.jsonl",
        [
            json.dumps({"qa_id": "a", "answer": "x", "contexts": []}),
            "",
            '{"qa_id": "b", "answer": ',
        ],
    )

    with pytest.raises(CandidateError) as error:
        outputs_from_text(outputs_text(path), [{"qa_id": "a", "question": "q"}])

    assert f"{path} line 3:" in str(error.value) and "not valid JSON" in str(error.value)


def test_outputs_file_line_that_is_not_an_object(tmp_path):
    path = _write_lines(tmp_path / "out.jsonl", ['["a", "list"]'])

    with pytest.raises(CandidateError, match="line 1: expected a JSON object"):
        outputs_from_text(outputs_text(path), [{"qa_id": "a", "question": "q"}])


def test_missing_outputs_file_is_a_candidate_error(tmp_path):
    with pytest.raises(CandidateError, match="does not exist"):
        outputs_from_text(outputs_text(tmp_path / "absent.jsonl"), [])


def test_outputs_file_matches_items_and_fails_missing_ones(tmp_path):
    items = [
        {"qa_id": "by-id", "question": "Question one?"},
        {"qa_id": "by-question", "question": "Question two?"},
        {"qa_id": "missing", "question": "Question three?"},
        {"qa_id": "malformed", "question": "Question four?"},
    ]
    path = _write_lines(
        tmp_path / "out.jsonl",
        [
            json.dumps({"qa_id": "malformed", "answer": None}),
            json.dumps({"question": "Question two?", "answer": "two", "contexts": [{"id": "c#2", "text": "ctx two"}]}),
            json.dumps({"qa_id": "by-id", "answer": "one", "contexts": [{"id": "c#1", "text": "ctx one"}]}),
            json.dumps({"qa_id": "not-in-golden-set", "answer": "stray"}),
        ],
    )

    outputs = outputs_from_text(outputs_text(path), items)

    assert [o.qa_id for o in outputs] == [i["qa_id"] for i in items]  # golden-set order, not file order
    by_id = {o.qa_id: o for o in outputs}
    assert (by_id["by-id"].status, by_id["by-id"].answer) == (OK, "one")
    assert by_id["by-id"].contexts == [{"id": "c#1", "text": "ctx one"}]
    assert (by_id["by-question"].status, by_id["by-question"].answer) == (OK, "two")
    assert by_id["missing"].status == FAILED and by_id["missing"].error == "no output in the file for this item"
    assert by_id["malformed"].status == FAILED and "malformed output" in by_id["malformed"].error


# --- the reference candidate -----------------------------------------------------------------

REF_CHUNKS = {
    "logs#0": "RouteWise API request logs are retained for 90 days. After that the logs are deleted automatically.",
    "hotel#0": "The hotel cap is EUR 230 per night in London. Breakfast is included in the hotel cap.",
    "forklift#0": "Forklift drivers must hold a valid licence. Every forklift is inspected before each shift.",
    "oncall#0": "An on-call shift lasts exactly seven days. Shifts start on Monday at ten in the morning.",
    "pallets#0": "Pallets are wrapped in recycled film. Damaged pallets go to the repair bay.",
}


@pytest.fixture(scope="module")
def reference(embedder) -> ReferenceCandidate:
    return ReferenceCandidate(list(REF_CHUNKS), list(REF_CHUNKS.values()), embedder, top_k=3)


def test_reference_candidate_returns_top_k_contexts_in_rank_order(reference, embedder):
    question = "What is the maximum hotel price per night in London?"

    output = reference(question)

    contexts = output["contexts"]
    assert len(contexts) == 3
    assert contexts[0]["id"] == "hotel#0"
    assert len({c["id"] for c in contexts}) == 3
    assert all(c["text"] == REF_CHUNKS[c["id"]] for c in contexts)
    # Rank order: cosine similarity to the question does not increase down the list, and nothing
    # left out scores higher than the last context kept.
    query = embedder.embed([question])[0]
    similarity = {cid: float(embedder.embed([text])[0] @ query) for cid, text in REF_CHUNKS.items()}
    kept = [similarity[c["id"]] for c in contexts]
    assert kept == sorted(kept, reverse=True)
    left_out = [s for cid, s in similarity.items() if cid not in {c["id"] for c in contexts}]
    assert max(left_out) <= kept[-1]


def test_reference_candidate_answer_is_a_sentence_from_its_contexts(reference):
    output = reference("How many days are API request logs retained?")

    answer_sources = [c["id"] for c in output["contexts"] if output["answer"] in split_sentences(c["text"])]
    assert answer_sources, output
    assert output["contexts"][0]["id"] == "logs#0"
    assert "90 days" in output["answer"]
    assert validate_output(output)[0] == output["answer"]


def test_reference_candidate_runs_through_run_candidate(reference):
    outputs = run_candidate(reference, [{"qa_id": "q1", "question": "Who must hold a licence?"}], timeout_s=30)

    assert outputs[0].status == OK
    assert outputs[0].contexts[0]["id"] == "forklift#0"


def test_reference_candidate_top_k_larger_than_the_corpus_returns_every_chunk(embedder):
    small = ReferenceCandidate(["a#0", "b#0"], ["Apples are red.", "The sky is blue."], embedder, top_k=5)

    output = small("What colour is the sky?")

    assert [c["id"] for c in output["contexts"]] == ["b#0", "a#0"]
    assert output["answer"] == "The sky is blue."


def test_reference_candidate_without_sentences_says_it_does_not_know(embedder):
    empty = ReferenceCandidate(["a#0"], [""], embedder, top_k=1)

    assert empty("Anything?")["answer"] == "I don't know."


def test_reference_candidate_rejects_top_k_below_one(embedder):
    with pytest.raises(ValueError, match="top_k"):
        ReferenceCandidate(["a#0"], ["text"], embedder, top_k=0)


def test_reference_candidate_embeds_chunks_once(embedder):
    candidate = ReferenceCandidate(
        ["a#0", "b#0"], ["Unique text alpha 7781.", "Unique text beta 7782."], embedder, top_k=1
    )

    assert candidate.chunk_vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(candidate.chunk_vectors, axis=1), 1.0, atol=1e-4)


def test_an_entry_point_whose_text_reads_as_an_outputs_file_is_refused():
    # 'm:f.jsonl' would come back from its text form as an outputs file, skipping the outputs-file checks.
    with pytest.raises(CandidateError, match="may not end in .jsonl"):
        CandidateSpec.entry("my_rag:answer.jsonl")
    assert CandidateSpec.entry("my_rag:answer").kind == "entry_point"


def test_an_empty_outputs_file_or_one_without_a_usable_record_is_a_candidate_error(tmp_path):
    with pytest.raises(CandidateError, match="holds no records"):
        outputs_text(_write_lines(tmp_path / "empty.jsonl", [""]))
    unusable = _write_lines(
        tmp_path / "unusable.jsonl",
        [
            json.dumps({"qa_id": "a", "answer": None}),
            json.dumps({"answer": "nothing says which question this answers"}),
        ],
    )
    with pytest.raises(CandidateError, match=r"no usable record: line 1: 'answer' must be a string; line 2: .*'qa_id'"):
        outputs_text(unusable)


LIMIT = 20_000  # MAX_FIELD_CHARS, the limit `rag-eval evaluate` applies to each field


def test_an_over_long_field_fails_its_item_with_the_reason(tmp_path):
    items = [{"qa_id": name, "question": f"Question {name}?"} for name in ("answer", "context", "echo", "fits")]
    huge = "Refunds are processed quickly. " * 33_000  # about 1 MB: minutes of scoring per item
    path = _write_lines(
        tmp_path / "out.jsonl",
        [
            json.dumps({"qa_id": "answer", "answer": huge, "contexts": []}),
            json.dumps(
                {
                    "qa_id": "context",
                    "answer": "short",
                    "contexts": [{"id": "c", "text": "ok"}, {"id": "d", "text": huge}],
                }
            ),
            json.dumps({"qa_id": "echo", "question": huge, "answer": "short", "contexts": []}),
            json.dumps({"qa_id": "fits", "answer": "a" * LIMIT, "contexts": [{"id": "c", "text": "b" * LIMIT}]}),
        ],
    )

    by_id = {o.qa_id: o for o in outputs_from_text(outputs_text(path), items)}

    assert by_id["answer"].status == FAILED
    assert f"answer is {len(huge):,} characters, over the limit of {LIMIT:,} per field" in by_id["answer"].error
    assert by_id["context"].status == FAILED and "context at rank 1 is" in by_id["context"].error
    assert by_id["echo"].status == FAILED and "question is" in by_id["echo"].error
    assert by_id["fits"].status == OK and len(by_id["fits"].answer) == LIMIT
    with pytest.raises(ValueError, match="answer is 20,001 characters"):
        validate_output({"answer": "a" * (LIMIT + 1), "contexts": []})  # an entry point's reply too


def test_a_lone_surrogate_in_an_output_becomes_a_replacement_character(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(
        json.dumps(
            {
                "qa_id": "a",
                "answer": "Kept 90 days.\ud800",
                "contexts": [{"id": "c\udfff", "text": "Logs are kept 90 days.\udbff"}],
            }
        )
        + "\n"
    )

    (output,) = outputs_from_text(outputs_text(path), [{"qa_id": "a", "question": "How long?"}])

    assert output.status == OK and output.answer == "Kept 90 days.\ufffd"
    assert output.contexts == [{"id": "c\ufffd", "text": "Logs are kept 90 days.\ufffd"}]
    assert validate_output({"answer": "\U0001f600\ud83d", "contexts": []})[0] == "\U0001f600\ufffd"
    assert validate_output({"answer": "\ud83d\ude00", "contexts": []})[0] == "\U0001f600"  # a whole pair: its character
