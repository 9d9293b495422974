"""The LLM question generator against the real local llama.cpp server, and its failure paths.

SmolLM2-135M writes poor questions: against the real server these tests check plumbing (schemas,
item fields, order, cache), not question quality. The paths the real server never takes (invalid
JSON, a 503, a 400, a leaked answer on demand) are driven by the named FakeOpenAIServer.
"""

from __future__ import annotations

import json
import socket

import pytest

from rag_eval_pipeline.core.llm.client import LLMMisconfigured, LLMSettings, LLMUnavailable, StructuredLLM
from rag_eval_pipeline.synthesis.items import (
    MULTI_CONTEXT,
    QUESTION_TYPES,
    REASONING,
    REFUSAL,
    SIMPLE,
    UNANSWERABLE,
    GenerationFailure,
    GenerationTask,
    QAItem,
    SourceChunk,
)
from rag_eval_pipeline.synthesis.llm_generation import (
    INSTRUCTIONS,
    PROMPT_VERSION,
    AnswerAndQuestion,
    GeneratorMisconfigured,
    GeneratorUnavailable,
    LLMGenerator,
    QuestionOnly,
    build_llm_generator,
    check_reply,
)
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, Reply

LEAVE = SourceChunk(
    "leave#0",
    "leave",
    "Northwind Employee Handbook",
    "Annual leave",
    "Full-time employees receive 25 days of paid annual leave per calendar year. Part-time employees receive "
    "leave in proportion to their contracted hours. Up to 5 unused days may be carried over to the next year; "
    "carried-over days expire on 31 March.",
)
SHIPPING = SourceChunk(
    "shipping#0",
    "shipping",
    "Northwind Shipping Policy",
    "Delivery times and costs",
    "Standard delivery within Germany takes 2 to 4 business days and costs EUR 4.90. Orders over EUR 50 ship "
    "free of charge. Express delivery costs EUR 12.50 and arrives the next business day if the order is placed "
    "before 2 pm.",
)
RETURNS = SourceChunk(
    "returns#0",
    "returns",
    "Northwind Returns Policy",
    "",
    "Customers may return unused items within 30 days of delivery. Refunds are issued to the original payment "
    "method within 5 business days after the return arrives at our warehouse in Kassel.",
)
TASKS = {
    SIMPLE: GenerationTask(SIMPLE, (LEAVE,), cluster_id=0, cluster_label="leave days"),
    REASONING: GenerationTask(REASONING, (SHIPPING,), cluster_id=1, cluster_label="delivery costs"),
    MULTI_CONTEXT: GenerationTask(MULTI_CONTEXT, (SHIPPING, RETURNS), cluster_id=1, cluster_label="orders"),
    UNANSWERABLE: GenerationTask(UNANSWERABLE, (LEAVE,), cluster_id=0, cluster_label="leave days"),
}


def real_settings(server, **settings) -> LLMSettings:
    # llama-cpp-python's server knows json_object with a schema, not json_schema.
    # timeout: the local server answers one request at a time on a few shared CPU cores.
    settings = {"timeout_s": 300.0, **settings}
    return LLMSettings(base_url=server.base_url, model=server.model, response_format="json_object_schema", **settings)


def fake_generator(server: FakeOpenAIServer, **settings) -> LLMGenerator:
    # concurrency 1: the fake hands out its replies in request order, so tasks must ask in task order.
    settings = {"concurrency": 1, **settings}
    return LLMGenerator(StructuredLLM(LLMSettings(base_url=server.base_url, model="fake", **settings)))


def _assert_well_formed(task: GenerationTask, outcome, generator: LLMGenerator) -> None:
    if isinstance(outcome, GenerationFailure):
        assert outcome.task == task and outcome.generator == generator.name and outcome.reason
        return
    assert isinstance(outcome, QAItem)
    assert outcome.question_type == task.question_type
    assert outcome.generator == generator.name and outcome.prompt_version == PROMPT_VERSION
    assert outcome.source_chunk_ids == [c.chunk_id for c in task.chunks]
    assert outcome.question.strip() and "?" in outcome.question and outcome.template == ""
    if task.question_type == UNANSWERABLE:
        assert outcome.gold_chunk_ids == [] and outcome.gold_contexts == [] and outcome.ground_truth == REFUSAL
    else:
        assert outcome.gold_chunk_ids == [c.chunk_id for c in task.chunks]
        assert outcome.gold_contexts == [c.text for c in task.chunks]
        assert outcome.ground_truth.strip()


# --- the real local server ----------------------------------------------------------------------------


@pytest.mark.llm
def test_one_task_of_each_type_against_the_real_server(llama_server):
    generator = build_llm_generator(real_settings(llama_server))
    assert generator.name == f"llm:{llama_server.model}"
    assert set(generator.supported_types) == set(QUESTION_TYPES)
    tasks = list(TASKS.values())
    outcomes = generator.generate(tasks)
    assert len(outcomes) == len(tasks)
    for task, outcome in zip(tasks, outcomes):
        _assert_well_formed(task, outcome, generator)
    # Greedy decoding makes each outcome reproducible. SmolLM2 passed the checks on every simple task
    # we measured (5 of 5) but only about half of the other types, so only the simple one must be an
    # item. Passing the checks says nothing of quality: its answers are often not from the passage,
    # which verification's grounding stage rejects.
    assert isinstance(outcomes[0], QAItem), outcomes[0]
    assert generator.usage["calls"] >= len(tasks) and generator.usage["completion_tokens"] > 0


@pytest.mark.llm
def test_a_rerun_with_the_same_cache_makes_no_call_and_gives_identical_outcomes(llama_server, tmp_path):
    cache = str(tmp_path / "generator.sqlite")
    tasks = [TASKS[SIMPLE], TASKS[UNANSWERABLE]]
    first_generator = build_llm_generator(real_settings(llama_server), cache_path=cache)
    first = first_generator.generate(tasks)
    # Only parsed replies are cached (an unparsable one is retried next run); the grammar keeps these parsable.
    assert not any(isinstance(o, GenerationFailure) and "reply unusable" in o.reason for o in first), first
    assert first_generator.usage["calls"] >= len(tasks)

    again_generator = build_llm_generator(real_settings(llama_server), cache_path=cache)  # a new run, same cache
    again = again_generator.generate(tasks)
    assert again == first
    assert again_generator.usage["calls"] == 0 and again_generator.usage["cache_hits"] == len(tasks)


# --- the named fake: request shape and failure paths ------------------------------------------------


def _reply(question: str, answer: str | None = None) -> tuple[int, str, str]:
    payload = {"question": question} if answer is None else {"question": question, "answer": answer}
    return 200, json.dumps(payload), "stop"


GOOD = _reply(
    "How many days of paid annual leave do full-time employees get?",
    "Full-time employees receive 25 days of paid annual leave per calendar year.",
)


def test_each_request_carries_the_schema_and_the_passages_titles():
    with FakeOpenAIServer([GOOD, _reply("Can unused leave be paid out?")]) as server:
        outcomes = fake_generator(server, response_format="json_object_schema").generate(
            [TASKS[SIMPLE], TASKS[UNANSWERABLE]]
        )
    assert [type(o) for o in outcomes] == [QAItem, QAItem]
    simple, unanswerable = server.requests
    assert simple["response_format"] == {"type": "json_object", "schema": AnswerAndQuestion.model_json_schema()}
    assert unanswerable["response_format"] == {"type": "json_object", "schema": QuestionOnly.model_json_schema()}
    assert set(QuestionOnly.model_json_schema()["properties"]) == {"question"}
    prompt = simple["messages"][-1]["content"]
    assert '"Northwind Employee Handbook"' in prompt and '"Annual leave"' in prompt and LEAVE.text in prompt
    assert simple["temperature"] == 0.0 and simple["seed"] == 7
    assert outcomes[1].ground_truth == REFUSAL and outcomes[1].gold_chunk_ids == []


def test_json_schema_mode_names_the_call_after_the_question_type():
    with FakeOpenAIServer(
        [_reply("Which delivery is cheaper for a EUR 30 order?", "Standard, at EUR 4.90.")]
    ) as server:
        fake_generator(server).generate([TASKS[REASONING]])
    response_format = server.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "reasoning_question"
    assert response_format["json_schema"]["schema"] == AnswerAndQuestion.model_json_schema()


def test_multi_context_prompt_numbers_every_passage():
    with FakeOpenAIServer(
        [_reply("How long until a refund after a standard delivery?", "Up to 4 plus 5 days.")]
    ) as server:
        fake_generator(server).generate([TASKS[MULTI_CONTEXT]])
    prompt = server.requests[0]["messages"][-1]["content"]
    assert (
        '[1] Document: "Northwind Shipping Policy"' in prompt and '[2] Document: "Northwind Returns Policy"' in prompt
    )


def test_invalid_json_twice_is_a_failure_with_the_reason():
    with FakeOpenAIServer([(200, "Sure! Here is a question:", "stop"), (200, "{not json", "stop")]) as server:
        [outcome] = fake_generator(server).generate([TASKS[SIMPLE]])
    assert isinstance(outcome, GenerationFailure)
    assert "not valid JSON" in outcome.reason and "after one retry" in outcome.reason
    assert len(server.requests) == 2


def test_an_empty_question_is_a_failure():
    with FakeOpenAIServer([_reply("   ", "Full-time employees receive 25 days.")]) as server:
        [outcome] = fake_generator(server).generate([TASKS[SIMPLE]])
    assert isinstance(outcome, GenerationFailure) and outcome.reason == "generator returned an empty question"


def test_an_answer_leaked_into_the_question_is_a_failure():
    leaked = _reply(
        "Is it true that full-time employees receive 25 days of paid annual leave?",
        "Full-time employees receive 25 days of paid annual leave.",
    )
    with FakeOpenAIServer([leaked]) as server:
        [outcome] = fake_generator(server).generate([TASKS[SIMPLE]])
    assert isinstance(outcome, GenerationFailure) and "put the answer in the question" in outcome.reason


def test_a_server_that_keeps_answering_503_stops_the_run_naming_the_generator_and_url():
    with FakeOpenAIServer(default=Reply(503, "loading model", headers={"retry-after-ms": "10"})) as server:
        generator = fake_generator(server, max_retries=2, rate_limit_budget_s=0.5)  # 503 is retried while it lasts
        with pytest.raises(GeneratorUnavailable, match=rf"generator.*{server.base_url.replace('.', '[.]')}.*HTTP 503"):
            generator.generate([TASKS[SIMPLE]])
    assert issubclass(GeneratorUnavailable, LLMUnavailable)  # existing "server down" handlers still apply


def test_a_server_that_is_not_there_stops_the_run():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    generator = LLMGenerator(StructuredLLM(LLMSettings(base_url=url, model="m", max_retries=1)))
    with pytest.raises(LLMUnavailable, match=r"question generator's LLM server .*did not answer"):
        generator.generate([TASKS[SIMPLE]])


def test_a_400_is_a_configuration_error_without_retry():
    with FakeOpenAIServer([(400, "maximum context length is 2048 tokens", "stop")]) as server:
        with pytest.raises(GeneratorMisconfigured, match="generator.*HTTP 400.*maximum context length"):
            fake_generator(server).generate([TASKS[SIMPLE]])
    assert len(server.requests) == 1
    assert issubclass(GeneratorMisconfigured, LLMMisconfigured)


def test_a_mix_of_good_and_bad_replies_keeps_task_order():
    one_chunk_multi = GenerationTask(MULTI_CONTEXT, (SHIPPING,), cluster_id=1)  # rejected before any call
    tasks = [TASKS[SIMPLE], TASKS[REASONING], one_chunk_multi, TASKS[MULTI_CONTEXT], TASKS[UNANSWERABLE]]
    replies = [
        GOOD,
        _reply("Express delivery costs EUR 12.50.", "EUR 12.50"),  # not a question
        _reply(
            "What does a refund of a standard delivery order take in total?",
            "Delivery takes 2 to 4 business days and the refund 5 business days after the return arrives.",
        ),
        (200, "no json", "stop"),
        (200, "still none", "stop"),  # the unanswerable task, retried once
    ]
    with FakeOpenAIServer(replies) as server:
        generator = fake_generator(server)
        outcomes = generator.generate(tasks)
    assert [type(o).__name__ for o in outcomes] == [
        "QAItem",
        "GenerationFailure",
        "GenerationFailure",
        "QAItem",
        "GenerationFailure",
    ]
    assert [o.task for o in outcomes if isinstance(o, GenerationFailure)] == [tasks[1], tasks[2], tasks[4]]
    assert "does not end with '?'" in outcomes[1].reason
    assert outcomes[2].reason == "multi_context task needs two or more passages"
    assert "not valid JSON" in outcomes[4].reason
    assert outcomes[3].gold_chunk_ids == ["shipping#0", "returns#0"]
    assert len(server.requests) == 5 and generator.usage["calls"] == 5 and generator.usage["retries"] == 1


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        ("How many leave days?", "", "generator returned an empty answer"),
        ("Describe the leave policy.", "25 days.", "does not end with '?'"),
        ("How many days? Answer in days.", "25 days.", "does not end with '?'"),
        ("Why " + "really " * 80 + "?", "Because.", "question of 82 words (limit 80)"),
        ("Why?", "word " * 151, "answer of 151 words (limit 150)"),
        ("Is the refund issued within 5 business days?", "within 5 business days", "put the answer in the question"),
    ],
)
def test_check_reply_rejects(question, answer, reason):
    assert reason in check_reply(question, answer)


def test_check_reply_rejects_a_copy_of_the_instructions():
    # Small models often reply with our own instructions; six words in a row from them is a copy.
    instructions = INSTRUCTIONS[SIMPLE]
    echo = "Then write the question that this sentence answers?"
    assert "copied its instructions into the question" in check_reply(echo, "25 days.", instructions)
    assert "copied its instructions into the answer" in check_reply(
        "How many leave days?", "Copy one sentence of the PASSAGE as the answer.", instructions
    )


def test_check_reply_accepts_good_replies_and_matches_whole_words_only():
    instructions = INSTRUCTIONS[SIMPLE]
    assert check_reply("How many days does standard delivery take?", "2 to 4 business days", instructions) == ""
    assert check_reply('Which year did the policy start, "1900?"', "90") == ""  # "90" is not the word "1900"
    assert check_reply("Can unused leave be paid out?", None, INSTRUCTIONS[UNANSWERABLE]) == ""  # no answer asked for
    assert check_reply("Can unused leave be paid out?", None) == ""


@pytest.mark.parametrize("question", ["公司去年有多少名员工？", "كم عدد الموظفين في الشركة؟"])
def test_check_reply_accepts_a_full_width_or_arabic_question_mark(question):
    assert check_reply(question, "42 employees.") == ""
