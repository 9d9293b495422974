"""The LLM judge: few, batched, schema-guided calls per item over any OpenAI-compatible server.

Decomposed mode (2 calls for the four core metrics, whatever the number of chunks):
  answer        statements of A with a support verdict each (faithfulness), and M questions A
                answers plus whether A is noncommittal (answer relevance), in ONE call
  ground_truth  a verdict per sentence of G (context recall) and per chunk (context precision)
When only one of faithfulness / answer relevance is asked for, its half of `answer` is asked alone
(answer_statements or generated_questions). Optional: context_relevance (contextual relevancy),
correctness (answer correctness). Fused mode: both in a single call per item.
Each request's reply schema asks for exactly as many verdicts as the item has reference sentences,
chunks, answer statements or questions (minItems = maxItems), so a grammar-constrained server (vLLM,
llama.cpp) cannot return another count; the reply is validated against that schema, and the counts are
checked again: a wrong count makes that judgement a failure. Statement lists, whose length is not known
before the call, get at least one statement for a text with words and a ceiling against a model looping.
The judge's name carries a hash of its prompts and reply schemas' shapes, so an edit to them is a new judge.
`plan_calls` renders the requests a run would send, without sending them: the dry runs' cost.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.defaults import DEFAULT_JUDGE_MODE, JUDGE_MODES
from rag_eval_pipeline.core.judging.criteria import Criterion, CriterionReply
from rag_eval_pipeline.core.judging.criteria import reply_schema as criterion_reply_schema
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import (
    ANSWER_STATEMENTS,
    CHUNK_RELEVANCE,
    CONTEXT_RELEVANCE,
    CORRECTNESS,
    GENERATED_QUESTIONS,
    GROUND_TRUTH_SUPPORT,
    Correctness,
    CriterionVerdict,
    Failure,
    GeneratedQuestions,
    Judgement,
    Verdict,
    add_usage,
)
from rag_eval_pipeline.core.judging.results import NO_GROUND_TRUTH_FOR_RELEVANCE
from rag_eval_pipeline.core.llm.cache import LLMCallCache, request_key
from rag_eval_pipeline.core.llm.client import (
    RETRY_REMINDER,
    CallResult,
    LLMSettings,
    StructuredLLM,
    run_to_completion,
    settle,
)
from rag_eval_pipeline.core.text import is_noncommittal, split_sentences

# The judgements each kind of call answers; a correctness call also reads the answer's statements.
# A metric is served by the calls that answer what it needs (`calls_serving`), for token usage per metric.
CALL_ANSWERS: dict[str, frozenset[str]] = {
    "answer": frozenset({ANSWER_STATEMENTS, GENERATED_QUESTIONS}),
    ANSWER_STATEMENTS: frozenset({ANSWER_STATEMENTS}),
    GENERATED_QUESTIONS: frozenset({GENERATED_QUESTIONS}),
    "ground_truth": frozenset({GROUND_TRUTH_SUPPORT, CHUNK_RELEVANCE}),
    CONTEXT_RELEVANCE: frozenset({CONTEXT_RELEVANCE}),
    CORRECTNESS: frozenset({CORRECTNESS}),
    "fused_triad": frozenset({ANSWER_STATEMENTS, GENERATED_QUESTIONS, GROUND_TRUTH_SUPPORT, CHUNK_RELEVANCE}),
}
READS_TOO = {CORRECTNESS: ANSWER_STATEMENTS}
CRITERION_CALL = "criterion"  # one call per criterion metric and item


def calls_serving(needs) -> tuple[str, ...]:
    """The kinds of call that answer these needs (a metric's), in CALL_ANSWERS's order."""
    wanted = {need for need in needs if isinstance(need, str)}
    wanted |= {READS_TOO[need] for need in wanted if need in READS_TOO}
    kinds = [kind for kind, answers in CALL_ANSWERS.items() if answers & wanted]
    return tuple(kinds) + ((CRITERION_CALL,) if any(isinstance(n, Criterion) for n in needs) else ())


def call_serves(metrics) -> dict[str, tuple[str, ...]]:
    """{call kind: the metrics it serves} for a metric set (core/metrics/registry.py Metric objects)."""
    served: dict[str, list[str]] = {}
    for metric in metrics:
        for kind in calls_serving(metric.needs):
            served.setdefault(kind, []).append(metric.name)
    return {kind: tuple(names) for kind, names in served.items()}


SYSTEM = "You are a strict evaluator of a retrieval-augmented QA system. Answer only with JSON that follows the schema."


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatementVerdict(_Strict):
    statement: str
    verdict: Literal[0, 1]


class StatementVerdicts(_Strict):
    statements: list[StatementVerdict]


class QuestionsFromAnswer(_Strict):
    questions: list[str]
    noncommittal: bool


class AnswerJudgement(_Strict):
    statements: list[StatementVerdict]
    questions: list[str]
    noncommittal: bool


class GroundTruthVerdicts(_Strict):
    sentence_verdicts: list[Literal[0, 1]]
    chunk_relevance: list[Literal[0, 1]]


class CorrectnessVerdicts(_Strict):
    answer_verdicts: list[Literal[0, 1]]
    truth_verdicts: list[Literal[0, 1]]


class FusedTriad(_Strict):
    statements: list[StatementVerdict]
    questions: list[str]
    noncommittal: bool
    sentence_verdicts: list[Literal[0, 1]]
    chunk_relevance: list[Literal[0, 1]]


# One template per kind of call, filled by str.format with the fields of `_fields`.
PROMPTS = {
    "answer": (
        "statements: split the ANSWER into short, self-contained factual statements; for each, verdict 1 if the "
        "CONTEXT directly supports it, 0 if not.\n"
        "questions: {n_questions} different questions the ANSWER answers. noncommittal: true if the answer "
        "is evasive or says it does not know.\n\n"
        "QUESTION: {question}\n\nCONTEXT:\n{context}\n\nANSWER: {answer}"
    ),
    ANSWER_STATEMENTS: (
        "Split the ANSWER into short, self-contained factual statements. For each, verdict 1 if the CONTEXT "
        "directly supports it, 0 if not. Ignore the question when judging support.\n\n"
        "QUESTION: {question}\n\nCONTEXT:\n{context}\n\nANSWER: {answer}"
    ),
    GENERATED_QUESTIONS: (
        "Write {n_questions} different questions that the ANSWER below answers. Set noncommittal to true "
        "if the answer is evasive or says it does not know.\n\n"
        "ANSWER: {answer}"
    ),
    "ground_truth": (
        "For each numbered REFERENCE sentence, verdict 1 if the CONTEXT chunks support it, else 0 "
        "(sentence_verdicts: exactly {n_sentences} values). For each numbered CONTEXT chunk, 1 if it is useful "
        "for the reference answer, else 0 (chunk_relevance: exactly {n_chunks} values).\n\n"
        "QUESTION: {question}\n\nCONTEXT:\n{context}\n\nREFERENCE:\n{reference}"
    ),
    CONTEXT_RELEVANCE: (
        "Split the CONTEXT into short statements. For each, verdict 1 if it is relevant to answering the "
        "QUESTION, else 0.\n\nQUESTION: {question}\n\nCONTEXT:\n{context}"
    ),
    CORRECTNESS: (
        "answer_verdicts: for each of the {n_claims} ANSWER statements, 1 if the REFERENCE supports it, else 0. "
        "truth_verdicts: for each of the {n_sentences} REFERENCE sentences, 1 if the ANSWER states it, else 0.\n\n"
        "ANSWER STATEMENTS:\n{claims}\n\nREFERENCE:\n{reference}"
    ),
    "fused_triad": (
        "Evaluate in one pass.\n"
        "statements: split the ANSWER into factual statements, verdict 1 if the CONTEXT supports each, else 0.\n"
        "questions: {n_questions} questions the ANSWER answers; noncommittal: true if the answer is evasive.\n"
        "sentence_verdicts: exactly {n_sentences} values, 1 if the CONTEXT supports each REFERENCE sentence.\n"
        "chunk_relevance: exactly {n_chunks} values, 1 if each CONTEXT chunk is useful for the reference.\n\n"
        "QUESTION: {question}\n\nCONTEXT:\n{context}\n\n"
        "ANSWER: {answer}\n\nREFERENCE:\n{reference}"
    ),
}
SCHEMAS: dict[str, type[BaseModel]] = {
    "answer": AnswerJudgement,
    ANSWER_STATEMENTS: StatementVerdicts,
    GENERATED_QUESTIONS: QuestionsFromAnswer,
    "ground_truth": GroundTruthVerdicts,
    CONTEXT_RELEVANCE: StatementVerdicts,
    CORRECTNESS: CorrectnessVerdicts,
    "fused_triad": FusedTriad,
}


# The lists whose length is known before the call, and the field of `_fields` that says it: the reply
# schema asks for exactly that many items.
EXACT_LENGTHS = {
    "questions": "n_questions",
    "sentence_verdicts": "n_sentences",
    "chunk_relevance": "n_chunks",
    "truth_verdicts": "n_sentences",
    "answer_verdicts": "n_claims",
}
# Statement lists: at most one statement per WORDS_PER_STATEMENT words of their text (at least
# MIN_STATEMENT_CEILING, at most MAX_STATEMENTS), so a small model looping inside the list must close it.
WORDS_PER_STATEMENT = 3
MIN_STATEMENT_CEILING = 4
MAX_STATEMENTS = 64
# Fixed lengths for the prompt version's schemas: any will do, as long as they do not vary per item.
SHAPE_FIELDS = {"n_sentences": 2, "n_chunks": 3, "n_claims": 4, "answer": "one two three four five", "context": "[1] x"}


def reply_schema(kind: str, fields: dict) -> type[BaseModel]:
    """The reply model of one request: the kind's schema with each list bounded by what `fields` say."""
    base = SCHEMAS[kind]
    return _bounded(base, _bounds(base, kind, fields))


def _bounds(base: type[BaseModel], kind: str, fields: dict) -> tuple[tuple[str, int, int], ...]:
    bounds = []
    for name in base.model_fields:
        if name in EXACT_LENGTHS:
            length = fields[EXACT_LENGTHS[name]]
            bounds.append((name, length, length))
        elif name == "statements":
            text = fields["context"] if kind == CONTEXT_RELEVANCE else fields["answer"]
            bounds.append((name, *_statement_bounds(text)))
    return tuple(bounds)


def _statement_bounds(text: str) -> tuple[int, int]:
    """At least one statement from a text with words (none found is a failure anyway), and a ceiling."""
    words = len(text.split())
    if not words:
        return 0, 0
    return 1, min(MAX_STATEMENTS, max(MIN_STATEMENT_CEILING, math.ceil(words / WORDS_PER_STATEMENT)))


@functools.lru_cache(maxsize=512)
def _bounded(base: type[BaseModel], bounds: tuple[tuple[str, int, int], ...]) -> type[BaseModel]:
    """A subclass of base (same name, so the same schema title) whose lists have those lengths."""
    fields: dict[str, Any] = {
        name: (base.model_fields[name].annotation, Field(min_length=low, max_length=high)) for name, low, high in bounds
    }
    return create_model(base.__name__, __base__=base, **fields)


def prompt_version(n_questions: int) -> str:
    """A short hash of everything that shapes what the judge is asked: templates, message layout,
    reply schemas (their shapes, with fixed lengths), the reminder of a retried call and the number of
    questions. Computed, not bumped by hand, so no prompt edit can keep an old version."""
    shape = {**SHAPE_FIELDS, "n_questions": n_questions}
    material = {
        "prompts": PROMPTS,
        "schemas": {kind: reply_schema(kind, shape).model_json_schema() for kind in SCHEMAS},
        "layout": _messages(_numbered(["first", "second"])),
        "retry_reminder": RETRY_REMINDER,
        "n_questions": n_questions,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()[:8]


def _fields(item: EvalItem, truth: list[str], n_questions: int) -> dict:
    return {
        "question": item.question,
        "answer": item.answer,
        "context": _numbered(item.context_texts),
        "reference": _numbered(truth),
        "n_sentences": len(truth),
        "n_chunks": len(item.contexts),
        "n_questions": n_questions,
    }


def _numbered(texts: list[str]) -> str:
    return "\n".join(f"[{i + 1}] {text}" for i, text in enumerate(texts)) or "(none)"


class LLMJudge:
    def __init__(self, llm: StructuredLLM, mode: str = DEFAULT_JUDGE_MODE, n_questions: int = 3):
        if mode not in JUDGE_MODES:
            raise ValueError(f"mode must be 'decomposed' or 'fused', got {mode!r}")
        self.llm, self.mode, self.n_questions = llm, mode, n_questions
        self.name = f"llm:{llm.settings.model}:{mode}:prompt-{prompt_version(n_questions)}"

    def judge_many(self, items: list[EvalItem], needs: set) -> list[Judgement]:
        return run_to_completion(self.ajudge_many(items, needs))

    async def ajudge_many(self, items: list[EvalItem], needs: set) -> list[Judgement]:
        """judge_many on the caller's event loop (a notebook's, a service's)."""
        # Bounded concurrency keeps a vLLM server's batches full without flooding a small server.
        limit = asyncio.Semaphore(self.llm.settings.concurrency)
        self.llm.open()
        try:
            return await self.llm.run_all(self._judge(item, needs, limit) for item in items)
        finally:
            await self.llm.close()

    async def _judge(self, item: EvalItem, needs: set, limit: asyncio.Semaphore) -> Judgement:
        with tracing.span(f"judge {item.qa_id}", tracing.EVALUATOR, _span_attributes(item, self.name)):
            judgement = await self._judge_item(item, needs, limit)
            judgement.trace = tracing.ids()
        return judgement

    async def _judge_item(self, item: EvalItem, needs: set, limit: asyncio.Semaphore) -> Judgement:
        judgement = Judgement()
        truth = split_sentences(item.ground_truth)
        call = self._caller(_fields(item, truth, self.n_questions), judgement, limit)

        triad = {ANSWER_STATEMENTS, GENERATED_QUESTIONS, GROUND_TRUTH_SUPPORT, CHUNK_RELEVANCE}
        tasks = []
        if self.mode == "fused" and needs & triad:
            tasks.append(self._fused(item, truth, call, judgement))
        else:
            wants_statements = ANSWER_STATEMENTS in needs or CORRECTNESS in needs
            if wants_statements and GENERATED_QUESTIONS in needs:
                tasks.append(self._answer(item, call, judgement))
            elif wants_statements:
                tasks.append(self._answer_statements(item, call, judgement))
            elif GENERATED_QUESTIONS in needs:
                tasks.append(self._questions(item, call, judgement))
            if needs & {GROUND_TRUTH_SUPPORT, CHUNK_RELEVANCE}:
                tasks.append(self._ground_truth(item, truth, call, judgement))
        if CONTEXT_RELEVANCE in needs:
            tasks.append(self._context_relevance(item, call, judgement))
        tasks += [self._criterion(item, need, call, judgement) for need in needs if isinstance(need, Criterion)]
        await settle(tasks)  # all of this item's calls end (and are cached) before a failure is raised
        if CORRECTNESS in needs:  # reuses the answer's statements, so it runs after them
            await self._correctness(item, truth, call, judgement)
        return judgement

    def _caller(self, fields: dict, judgement: Judgement, limit: asyncio.Semaphore):
        """One item's calls: the kind's prompt and reply schema, filled with the item's fields (or a prompt
        and schema of the call's own: a criterion's)."""

        async def call(kind: str, prompt: str = "", schema: type[BaseModel] | None = None, **more_fields) -> CallResult:
            request_fields = {**fields, **more_fields}
            messages = _messages(prompt or PROMPTS[kind].format(**request_fields))
            async with limit:
                result = await self.llm.call(kind, messages, schema or reply_schema(kind, request_fields))
            add_usage(judgement.usage, kind, result.usage)
            return result

        return call

    async def _criterion(self, item: EvalItem, found: Criterion, call, judgement: Judgement) -> None:
        texts = {"question": item.question, "answer": item.answer, "contexts": _numbered(item.context_texts)}
        texts["ground_truth"] = item.ground_truth
        result = await call(CRITERION_CALL, found.prompt(texts), criterion_reply_schema(len(found.steps)))
        reply = cast(CriterionReply, result.parsed)
        judgement.criteria[found.key] = (
            Failure(result.failure) if reply is None else CriterionVerdict(reply.score, list(reply.step_findings))
        )

    async def _answer(self, item, call, judgement) -> None:
        result = await call("answer")
        if result.parsed is None:
            judgement.answer_statements = judgement.generated_questions = Failure(result.failure)
            return
        judgement.answer_statements = _answer_verdicts(result, item.answer)
        judgement.generated_questions = GeneratedQuestions(
            [q for q in result.parsed.questions if q.strip()], result.parsed.noncommittal
        )

    async def _answer_statements(self, item, call, judgement) -> None:
        if not item.answer.strip():
            judgement.answer_statements = []
            return
        result = await call(ANSWER_STATEMENTS)
        judgement.answer_statements = _answer_verdicts(result, item.answer)

    async def _questions(self, item, call, judgement) -> None:
        result = await call(GENERATED_QUESTIONS)
        judgement.generated_questions = (
            Failure(result.failure)
            if result.parsed is None
            else GeneratedQuestions([q for q in result.parsed.questions if q.strip()], result.parsed.noncommittal)
        )

    async def _ground_truth(self, item, truth, call, judgement) -> None:
        if not truth:
            judgement.ground_truth_support = []
            judgement.chunk_relevance = Failure(NO_GROUND_TRUTH_FOR_RELEVANCE)
            return
        result = await call("ground_truth")
        judgement.ground_truth_support, judgement.chunk_relevance = _truth_and_chunks(result, truth, item)

    async def _context_relevance(self, item, call, judgement) -> None:
        if not item.contexts:
            judgement.context_relevance = []
            return
        result = await call(CONTEXT_RELEVANCE)
        judgement.context_relevance = _verdicts_or_failure(
            result, expected_from=" ".join(item.context_texts), what="the retrieved contexts"
        )

    async def _correctness(self, item, truth, call, judgement) -> None:
        statements = judgement.answer_statements
        if isinstance(statements, Failure):
            judgement.correctness = Failure(f"answer statements unavailable: {statements.reason}")
            return
        claims = [v.statement for v in statements or []]
        if not claims or not truth:
            judgement.correctness = Correctness([], claims, truth)
            return
        result = await call(CORRECTNESS, claims=_numbered(claims), n_claims=len(claims))
        if result.parsed is None:
            judgement.correctness = Failure(result.failure)
        elif len(result.parsed.answer_verdicts) != len(claims) or len(result.parsed.truth_verdicts) != len(truth):
            judgement.correctness = Failure(
                f"verdict counts {len(result.parsed.answer_verdicts)}/{len(result.parsed.truth_verdicts)} do not match "
                f"{len(claims)} answer statements and {len(truth)} reference sentences"
            )
        else:
            judgement.correctness = Correctness(
                [c for c, v in zip(claims, result.parsed.answer_verdicts) if v],
                [c for c, v in zip(claims, result.parsed.answer_verdicts) if not v],
                [t for t, v in zip(truth, result.parsed.truth_verdicts) if not v],
            )

    async def _fused(self, item, truth, call, judgement) -> None:
        result = await call("fused_triad")
        if result.parsed is None:
            failure = Failure(result.failure)
            judgement.answer_statements = judgement.generated_questions = failure
            judgement.ground_truth_support = judgement.chunk_relevance = failure
            return
        parsed = result.parsed
        judgement.answer_statements = _answer_verdicts(
            CallResult(StatementVerdicts(statements=parsed.statements)), item.answer
        )
        judgement.generated_questions = GeneratedQuestions(
            [q for q in parsed.questions if q.strip()], parsed.noncommittal
        )
        truth_result = CallResult(
            GroundTruthVerdicts(sentence_verdicts=parsed.sentence_verdicts, chunk_relevance=parsed.chunk_relevance)
        )
        judgement.ground_truth_support, judgement.chunk_relevance = (
            _truth_and_chunks(truth_result, truth, item) if truth else ([], Failure(NO_GROUND_TRUTH_FOR_RELEVANCE))
        )


def _span_attributes(item: EvalItem, judge: str) -> dict:
    return {
        "rag_eval.qa_id": item.qa_id,
        "rag_eval.judge": judge,
        "input.value": item.question,
        "output.value": item.answer,
    }


def build_llm_judge(settings: LLMSettings, mode: str = DEFAULT_JUDGE_MODE, cache_path: str | None = None) -> LLMJudge:
    """The LLM judge with its on-disk call cache (in memory when no path is given)."""
    return LLMJudge(StructuredLLM(settings, LLMCallCache(cache_path or None)), mode=mode)


def _verdicts_or_failure(result: CallResult, expected_from: str = "", what: str = "") -> list[Verdict] | Failure:
    """The reply's statements with their verdicts; a Failure when the call failed, or when the judge found no
    statement in a text that makes one (`expected_from`): that is the judge failing, not a text without claims."""
    if result.parsed is None:
        return Failure(result.failure)
    parsed = cast(StatementVerdicts, result.parsed)  # the schema this call was made with
    verdicts = [Verdict(s.statement, s.verdict) for s in parsed.statements]
    if not verdicts and expected_from.strip():
        return Failure(f"the judge found no statement in {what}")
    return verdicts


def _answer_verdicts(result: CallResult, answer: str) -> list[Verdict] | Failure:
    """An empty or declining answer makes no claim: no statements, whatever the reply says."""
    if not answer.strip() or is_noncommittal(answer):
        return [] if result.parsed is not None else Failure(result.failure)
    return _verdicts_or_failure(result, expected_from=answer, what="a non-empty answer")


def _truth_and_chunks(result: CallResult, truth: list[str], item: EvalItem):
    if result.parsed is None:
        return Failure(result.failure), Failure(result.failure)
    parsed = cast(GroundTruthVerdicts, result.parsed)  # the schema this call was made with
    sentences, chunks = parsed.sentence_verdicts, parsed.chunk_relevance
    support = (
        [Verdict(t, v) for t, v in zip(truth, sentences)]
        if len(sentences) == len(truth)
        else Failure(f"{len(sentences)} verdicts for {len(truth)} reference sentences")
    )
    relevance = (
        list(chunks)
        if len(chunks) == len(item.contexts)
        else Failure(f"{len(chunks)} relevance verdicts for {len(item.contexts)} retrieved chunks")
    )
    return support, relevance


def _messages(prompt: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


# --- the calls a run would make, without making them ---------------------------------------------------

NOT_SENT_IN_A_PLAN = "not sent: a dry run"
CHARS_PER_TOKEN = 4  # a rough average for English prompts; the plan says its token counts are approximate
STAND_IN = "?"  # the answer of an item whose answer is not known before the run


@dataclass(frozen=True)
class PlannedCall:
    kind: str
    key: str  # the call cache's key: the sha256 of the request as it would be sent
    cached: bool  # answered by the call cache: nothing sent
    prompt_chars: int
    estimated: bool = False  # rendered from stand-in statements (the answer's sentences), not the judge's


@dataclass(frozen=True)
class CallPlan:
    judge: str
    items: int
    calls: tuple[PlannedCall, ...]
    max_tokens: int

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Per call kind: calls needed, answered by the cache, to send, approximate prompt tokens of those
        to send, and their completion tokens at most (max_tokens each, before any retry)."""
        kinds: dict[str, dict[str, int]] = {}
        for call in self.calls:
            row = kinds.setdefault(call.kind, dict.fromkeys(PLAN_COLUMNS, 0))
            row["calls"] += 1
            row["cached"] += call.cached
            row["estimated"] += call.estimated
            if not call.cached:
                row["to_send"] += 1
                row["prompt_tokens"] += math.ceil(call.prompt_chars / CHARS_PER_TOKEN)
                row["completion_tokens_at_most"] += self.max_tokens
        return kinds

    def describe(self) -> str:
        """The plan as the dry runs print it: a line, a table per call kind, the caveats."""
        kinds = self.by_kind()
        total = {column: sum(row[column] for row in kinds.values()) for column in PLAN_COLUMNS}
        lines = [
            f"{total['calls']} LLM calls for {self.items} items (judge {self.judge}): "
            f"{total['cached']} answered by the call cache, {total['to_send']} to send",
            "| call kind | calls | cached | to send | prompt tokens (approx.) | completion tokens (at most) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for kind, row in [*sorted(kinds.items()), ("total", total)]:
            lines.append(
                f"| {kind} | {row['calls']} | {row['cached']} | {row['to_send']} | "
                f"{row['prompt_tokens']:,} | {row['completion_tokens_at_most']:,} |"
            )
        lines.append(
            f"prompt tokens: rendered prompt characters / {CHARS_PER_TOKEN}, approximate; completion tokens: "
            f"max_tokens ({self.max_tokens}) per call to send, more if a reply is retried"
        )
        if total["estimated"]:
            lines.append(
                f"{total['estimated']} {CORRECTNESS} call(s) estimated: their prompts list the answer's sentences, "
                "as the answer statements they depend on are not cached"
            )
        return "\n".join(lines)


PLAN_COLUMNS = ("calls", "cached", "estimated", "to_send", "prompt_tokens", "completion_tokens_at_most")


class _Planner(StructuredLLM):
    """Renders each call exactly as StructuredLLM sends it and looks its key up in the cache; sends nothing."""

    def __init__(self, settings: LLMSettings, cache: LLMCallCache):
        super().__init__(settings, cache)
        self.planned: list[PlannedCall] = []
        self.estimating = False

    def open(self) -> None:
        self._start_run()

    async def close(self) -> None:
        return None

    async def call(self, kind: str, messages: list[dict], schema: type[BaseModel]) -> CallResult:
        key = request_key(self._request(kind, messages, schema))
        cached = self.cache.get(key)
        chars = sum(len(message["content"]) for message in messages)
        self.planned.append(PlannedCall(kind, key, cached is not None, chars, self.estimating))
        if cached is None:
            return CallResult(None, NOT_SENT_IN_A_PLAN)
        return CallResult(schema.model_validate_json(cached[0]))  # what a run gets: later calls follow from it


def plan_calls(
    items: list[EvalItem],
    needs: set,
    settings: LLMSettings,
    mode: str = DEFAULT_JUDGE_MODE,
    n_questions: int = 3,
    cache: LLMCallCache | None = None,
) -> CallPlan:
    """The calls `LLMJudge` would make for the items: the same code renders the same requests, and each is
    looked up in the cache instead of being sent. A correctness call depends on the answer statements of
    another call; when those are not cached, it is rendered with the answer's sentences in their place."""
    planner = _Planner(settings, cache if cache is not None else LLMCallCache())
    judge = LLMJudge(planner, mode=mode, n_questions=n_questions)
    judgements = judge.judge_many(items, needs)
    if CORRECTNESS in needs:
        planner.estimating = True
        run_to_completion(_estimate_correctness(judge, items, judgements))
    return CallPlan(judge.name, len(items), tuple(planner.planned), settings.max_tokens)


async def _estimate_correctness(judge: LLMJudge, items: list[EvalItem], judgements: list[Judgement]) -> None:
    limit = asyncio.Semaphore(1)
    for item, judgement in zip(items, judgements):
        statements = judgement.answer_statements
        if not (isinstance(statements, Failure) and statements.reason == NOT_SENT_IN_A_PLAN):
            continue
        stand_in = StatementVerdicts(
            statements=[StatementVerdict(statement=s, verdict=1) for s in split_sentences(item.answer)]
        )
        judgement.answer_statements = _answer_verdicts(CallResult(stand_in), item.answer)
        truth = split_sentences(item.ground_truth)
        call = judge._caller(_fields(item, truth, judge.n_questions), judgement, limit)
        await judge._correctness(item, truth, call, judgement)


def stand_in_item(qa_id: str, question: str, ground_truth: str) -> EvalItem:
    """A golden item before its candidate answered: a one-character answer and one empty chunk stand in
    for what is not known yet, so a plan counts the calls a real answer makes (its prompts exclude them)."""
    return EvalItem(qa_id, question, STAND_IN, [{"id": "", "text": ""}], ground_truth)


def cache_for_plan(location: str, tenant: str | None = None) -> LLMCallCache:
    """The call cache a run would read; a cache file that does not exist yet is not created by a plan."""
    from rag_eval_pipeline.stores.cache import is_url

    if location and not is_url(location) and not Path(location).is_file():
        return LLMCallCache()
    return LLMCallCache(location or None, tenant=tenant)
