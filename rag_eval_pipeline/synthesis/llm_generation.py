"""The LLM question generator: one schema-guided call per generation task, over any OpenAI-compatible server.

Each task (a question type plus its chunks) becomes one prompt. `StructuredLLM` parses the reply
against a pydantic schema (one retry for invalid or truncated JSON, then a failure with the reason).
Then `check_reply` checks what a schema cannot express: a real, short question that does not give
its answer away and does not just repeat our instructions. Anything that fails becomes a
`GenerationFailure` with its reason, so a bad reply is reported, never silently dropped. An
unreachable or misconfigured server stops the run (`GeneratorUnavailable`, `GeneratorMisconfigured`).

Whether an answer is true to its passage is not checked here: verification's grounding stage does that.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import cast

from pydantic import BaseModel, ConfigDict

from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import (
    RETRY_REMINDER,
    LLMMisconfigured,
    LLMSettings,
    LLMUnavailable,
    StructuredLLM,
    run_to_completion,
)
from rag_eval_pipeline.synthesis.items import (
    MULTI_CONTEXT,
    QUESTION_TYPES,
    REASONING,
    REFUSAL,
    SIMPLE,
    UNANSWERABLE,
    GenerationFailure,
    GenerationTask,
    Outcome,
    SourceChunk,
    make_item,
    normalise,
)

MAX_QUESTION_WORDS = 80
MAX_ANSWER_WORDS = 150
ECHO_WORDS = 6  # this many words in a row from our instructions is a copy, not a coincidence

SYSTEM = (
    "You write test questions for a question-answering system over a company's documents. "
    "Use only the passages you are given. Answer only with JSON that follows the schema."
)

# Short, plain instructions: small models copy long rule prose into their reply, and run on.
# No literal question mark in them either, or a copied rule would look like a question.
ENDS_WITH_QUESTION_MARK = " The question ends with a question mark and does not contain the answer."

INSTRUCTIONS = {
    SIMPLE: (
        "Copy one sentence of the PASSAGE as the answer, in the passage's own words. "
        "Then write the question that this sentence answers." + ENDS_WITH_QUESTION_MARK
    ),
    REASONING: (
        "Write a question that needs two or more facts of the PASSAGE and one step of reasoning: compare them, "
        "compute with them, or apply a rule to a case. The answer gives the conclusion and the facts it uses."
        + ENDS_WITH_QUESTION_MARK
    ),
    MULTI_CONTEXT: (
        "Write a question that needs a fact from each of the PASSAGES (they may come from different documents). "
        "The answer uses all of them." + ENDS_WITH_QUESTION_MARK
    ),
    UNANSWERABLE: (
        "Write a question on the topic of the PASSAGE that a reader of these documents might ask, "
        "but that the PASSAGE does not answer. The question ends with a question mark."
    ),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# No maxLength bounds in the schemas: llama-cpp-python expands maxLength into nested grammar rules and
# its server process dies on a bound above about 1000 characters, and strict json_schema servers may
# reject the keyword. Runaway strings are bounded by max_tokens instead (a truncated reply fails).


class AnswerAndQuestion(_Strict):
    # The answer comes first: choosing the fact, then asking for it, is easier for a model than
    # asking first and hoping the passage answers; small models also run away less in this order.
    answer: str
    question: str


class QuestionOnly(_Strict):
    """Unanswerable questions: the ground truth is always REFUSAL, so the model writes no answer."""

    question: str


class GeneratorUnavailable(LLMUnavailable):
    """The generator's server could not be reached (a LLMUnavailable, so existing handlers still catch it)."""


class GeneratorMisconfigured(LLMMisconfigured):
    """The generator's server refused the request itself (wrong model, response_format, prompt too long)."""


class LLMGenerator:
    supported_types = QUESTION_TYPES

    def __init__(self, llm: StructuredLLM):
        self.llm = llm
        self.name = f"llm:{llm.settings.model}"
        self.prompt_version = PROMPT_VERSION
        # StructuredLLM usage summed over every generate() of this generator (calls, cache_hits,
        # tokens, retries): the synthesis driver calls it once per round of tasks.
        self.usage: dict[str, int] = {}

    def generate(self, tasks: list[GenerationTask]) -> list[Outcome]:
        try:
            return run_to_completion(self._generate_all(tasks))
        except LLMMisconfigured as error:
            raise GeneratorMisconfigured(_as_generator(error)) from error
        except LLMUnavailable as error:
            raise GeneratorUnavailable(_as_generator(error)) from error

    async def _generate_all(self, tasks: list[GenerationTask]) -> list[Outcome]:
        # Bounded concurrency: full batches on vLLM, a short queue on a serial llama.cpp server.
        limit = asyncio.Semaphore(self.llm.settings.concurrency)
        self.llm.open()
        try:
            return await self.llm.run_all(self._generate(task, limit) for task in tasks)
        finally:
            await self.llm.close()

    async def _generate(self, task: GenerationTask, limit: asyncio.Semaphore) -> Outcome:
        problem = task_problem(task)
        if problem:
            return GenerationFailure(task, self.name, problem)
        schema = QuestionOnly if task.question_type == UNANSWERABLE else AnswerAndQuestion
        async with limit:
            result = await self.llm.call(f"{task.question_type}_question", messages_for(task), schema)
        for key, value in result.usage.items():
            self.usage[key] = self.usage.get(key, 0) + value
        if result.parsed is None:
            return GenerationFailure(task, self.name, f"generator reply unusable: {result.failure}")
        parsed = cast(QuestionOnly | AnswerAndQuestion, result.parsed)  # the schema this call was made with
        answer = getattr(parsed, "answer", None)  # None: an unanswerable question, no answer written
        problem = check_reply(parsed.question, answer, SYSTEM + "\n" + INSTRUCTIONS[task.question_type])
        if problem:
            return GenerationFailure(task, self.name, problem)
        return make_item(task, parsed.question, REFUSAL if answer is None else answer, self.name, self.prompt_version)


def build_llm_generator(
    settings: LLMSettings, cache_path: str | None = None, tenant: str | None = None
) -> LLMGenerator:
    """The LLM generator with its on-disk call cache (in memory when no path is given), in tenant's
    namespace (None: the shared one, for tools outside any tenant's run)."""
    return LLMGenerator(StructuredLLM(settings, LLMCallCache(cache_path or None, tenant=tenant)))


# --- prompts ---------------------------------------------------------------------------------------


def task_problem(task: GenerationTask) -> str:
    """Why a task cannot be sent at all ("" when it can): saves a call that could only go wrong."""
    if task.question_type not in QUESTION_TYPES:
        return f"unknown question type {task.question_type!r}"
    if not task.chunks:
        return "task has no passage to write from"
    if task.question_type == MULTI_CONTEXT and len(task.chunks) < 2:
        return "multi_context task needs two or more passages"
    return ""


def messages_for(task: GenerationTask) -> list[dict]:
    label = "PASSAGES" if len(task.chunks) > 1 else "PASSAGE"
    prompt = f"{INSTRUCTIONS[task.question_type]}\n\n{label}:\n\n{_passages(task.chunks)}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def _passages(chunks: tuple[SourceChunk, ...]) -> str:
    numbered = len(chunks) > 1
    return "\n\n".join(_passage(i + 1, chunk, numbered) for i, chunk in enumerate(chunks))


def _passage(number: int, chunk: SourceChunk, numbered: bool) -> str:
    # Title and heading let the model say what the question is about ("under the leave policy, ..."),
    # so the question stays meaningful to someone who has not seen the passage.
    where = f'Document: "{chunk.title}"' + (f', section: "{chunk.heading}"' if chunk.heading else "")
    prefix = f"[{number}] " if numbered else ""
    return f"{prefix}{where}\n{chunk.text.strip()}"


# --- reply checks ----------------------------------------------------------------------------------


def check_reply(question: str, answer: str | None, instructions: str = "") -> str:
    """Why a parsed reply is not a usable item ("" when it is). `answer` is None when none was asked for.

    A question must end with '?' (closing quotes aside). Without one, the generator has usually copied
    a statement or written an instruction ("Describe the policy."), so we reject rather than append
    one. A '?' elsewhere is not enough: small models echo the prompt, or add an instruction after the
    question ("... per year? Answer in days."), and neither belongs in a test question.
    """
    question = question.strip()
    if not question:
        return "generator returned an empty question"
    if not question.rstrip("\"'”’)]").endswith(("?", "\uff1f", "\u061f")):  # full-width and Arabic marks too
        return f"generator returned a question that does not end with '?': {_clip(question)!r}"
    if _words(question) > MAX_QUESTION_WORDS:
        return f"generator returned a question of {_words(question)} words (limit {MAX_QUESTION_WORDS})"
    if _echoes(question, instructions):
        return f"generator copied its instructions into the question: {_clip(question)!r}"
    if answer is None:
        return ""
    answer = answer.strip()
    if not answer:
        return "generator returned an empty answer"
    if _words(answer) > MAX_ANSWER_WORDS:
        return f"generator returned an answer of {_words(answer)} words (limit {MAX_ANSWER_WORDS})"
    if _echoes(answer, instructions):
        return f"generator copied its instructions into the answer: {_clip(answer)!r}"
    if _contains(question, answer):
        return f"generator put the answer in the question: {_clip(question)!r}"
    return ""


def _echoes(text: str, instructions: str) -> bool:
    """ECHO_WORDS words in a row shared with our instructions (the passages are not part of them)."""
    return bool(_runs(text) & _runs(instructions))


def _runs(text: str) -> set[str]:
    words = normalise(text).split()
    return {" ".join(words[i : i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}


def _contains(question: str, answer: str) -> bool:
    """The answer's words, in order, inside the question (whole words: "90" is not in "1900")."""
    needle = normalise(answer)
    return bool(needle) and f" {needle} " in f" {normalise(question)} "


def _words(text: str) -> int:
    return len(text.split())


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prompt_version() -> str:
    """ "llm-qa-" and a short hash of what the model is asked: the messages of every question type (with one
    and with two passages), the reply schemas and the reminder of a retried call. Computed, never bumped
    by hand, so no prompt edit can keep an old version."""
    chunks = (
        SourceChunk("a#0", "a", "Title A", "Heading A", "Text A."),
        SourceChunk("b#0", "b", "Title B", "", "Text B."),
    )
    material = {
        "messages": {
            kind: [messages_for(GenerationTask(kind, chunks[:n], 0)) for n in (1, 2)] for kind in QUESTION_TYPES
        },
        "schemas": [AnswerAndQuestion.model_json_schema(), QuestionOnly.model_json_schema()],
        "retry_reminder": RETRY_REMINDER,
    }
    return "llm-qa-" + hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()[:8]


PROMPT_VERSION = _prompt_version()


def _as_generator(error: Exception) -> str:
    """The client says "judge server"; here it is the generator's, and the user must know which to fix."""
    message = str(error)
    if "judge server" in message:
        return message.replace("judge server", "question generator's LLM server", 1)
    return f"question generator's LLM server: {message}"
