"""Each request's reply schema fixes every count known before the call (verdicts per reference sentence,
per chunk, per answer statement; the questions), so a grammar-constrained server returns exactly that
many; the judge's prompt version follows the schemas' shapes, not any item's lengths."""

from __future__ import annotations

import asyncio

import pytest

from rag_eval_pipeline.core.judging import llm_judge
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import CORRECTNESS, Failure
from rag_eval_pipeline.core.judging.llm_judge import (
    CONTEXT_RELEVANCE,
    LLMJudge,
    _fields,
    _messages,
    prompt_version,
    reply_schema,
)
from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM
from rag_eval_pipeline.core.metrics.registry import needed_judgements, resolve
from rag_eval_pipeline.core.text import split_sentences
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, follow_the_schema

ITEM = EvalItem(
    "q1",
    "How long are API logs kept, and who may read them?",
    "API logs are kept for 90 days. Only the security team may read them.",
    [
        {"id": "a#0", "text": "API request logs are kept for 90 days and then deleted."},
        {"id": "b#0", "text": "The cafeteria opens at 8 am."},
        {"id": "c#0", "text": "Access to logs is limited to the security team."},
    ],
    "API request logs are kept for 90 days. Only the security team may read them.",
)
TRUTH = split_sentences(ITEM.ground_truth)
FIELDS = _fields(ITEM, TRUTH, 3)


def _lengths(schema: dict, name: str) -> tuple[int | None, int | None]:
    field = schema["properties"][name]
    return field.get("minItems"), field.get("maxItems")


def test_every_count_known_before_the_call_is_exact_in_the_schema():
    ground_truth = reply_schema("ground_truth", FIELDS).model_json_schema()
    assert _lengths(ground_truth, "sentence_verdicts") == (2, 2)
    assert _lengths(ground_truth, "chunk_relevance") == (3, 3)
    fused = reply_schema("fused_triad", FIELDS).model_json_schema()
    assert _lengths(fused, "questions") == (3, 3) and _lengths(fused, "chunk_relevance") == (3, 3)
    correctness = reply_schema(CORRECTNESS, {**FIELDS, "n_claims": 4}).model_json_schema()
    assert _lengths(correctness, "answer_verdicts") == (4, 4) and _lengths(correctness, "truth_verdicts") == (2, 2)
    assert _lengths(reply_schema("generated_questions", FIELDS).model_json_schema(), "questions") == (3, 3)


def test_statement_lists_are_bounded_by_their_text():
    low, high = _lengths(reply_schema("answer_statements", FIELDS).model_json_schema(), "statements")
    assert low == 1 and high is not None and 4 <= high <= llm_judge.MAX_STATEMENTS
    assert _lengths(reply_schema("answer", {**FIELDS, "answer": ""}).model_json_schema(), "statements") == (0, 0)
    long_context = {**FIELDS, "context": "word " * 10_000}
    assert _lengths(reply_schema(CONTEXT_RELEVANCE, long_context).model_json_schema(), "statements") == (
        1,
        llm_judge.MAX_STATEMENTS,
    )


def test_a_reply_with_another_count_fails_validation_and_one_with_the_count_passes():
    schema = reply_schema("ground_truth", FIELDS)
    assert schema.model_validate({"sentence_verdicts": [1, 0], "chunk_relevance": [1, 0, 1]})
    with pytest.raises(ValueError, match="chunk_relevance"):
        schema.model_validate({"sentence_verdicts": [1, 0], "chunk_relevance": [1, 0]})


def test_the_prompt_version_follows_the_schema_shapes_not_the_items(monkeypatch):
    version = prompt_version(3)
    # Judging items of other lengths builds other schemas; the version is computed from fixed lengths.
    with FakeOpenAIServer(default=follow_the_schema) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake", concurrency=1)
        judge = LLMJudge(StructuredLLM(settings))
        judge.judge_many([ITEM, EvalItem("q2", "Q?", "A.", [{"id": "x", "text": "C."}], "G.")], {CORRECTNESS})
    assert prompt_version(3) == version and judge.name.endswith(version)
    monkeypatch.setattr(llm_judge, "_bounds", lambda base, kind, fields: ())  # the unbounded lists of before
    assert prompt_version(3) != version


def test_the_schema_following_fake_scores_every_judged_metric():
    from rag_eval_pipeline.core.metrics.registry import JUDGED_METRICS

    with FakeOpenAIServer(default=follow_the_schema) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake", concurrency=1)
        [judgement] = LLMJudge(StructuredLLM(settings)).judge_many([ITEM], needed_judgements(resolve(JUDGED_METRICS)))
    assert isinstance(judgement.chunk_relevance, list) and len(judgement.chunk_relevance) == 3
    assert isinstance(judgement.ground_truth_support, list) and len(judgement.ground_truth_support) == 2
    for value in (judgement.answer_statements, judgement.generated_questions, judgement.correctness):
        assert value is not None and not isinstance(value, Failure), value


@pytest.mark.llm
@pytest.mark.parametrize("kind", ["ground_truth", "fused_triad"])
def test_the_llama_cpp_server_returns_exactly_the_asked_counts(llama_server, kind):
    """A grammar-constrained server: its reply has one verdict per chunk and per reference sentence."""
    settings = LLMSettings(
        base_url=llama_server.base_url,
        model=llama_server.model,
        response_format="json_object_schema",
        timeout_s=300,
        max_tokens=1024,
    )
    llm = StructuredLLM(settings)
    messages = _messages(llm_judge.PROMPTS[kind].format(**FIELDS))

    async def ask():
        llm.open()
        try:
            return await llm.call(kind, messages, reply_schema(kind, FIELDS))
        finally:
            await llm.close()

    result = asyncio.run(ask())
    assert result.parsed is not None, result.failure
    reply = result.parsed.model_dump()
    assert len(reply["chunk_relevance"]) == 3 and len(reply["sentence_verdicts"]) == 2
    if kind == "fused_triad":
        assert len(reply["questions"]) == 3
