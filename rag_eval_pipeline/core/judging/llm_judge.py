"""The LLM judge: few, batched, schema-guided calls per item over any OpenAI-compatible server.

Decomposed mode (2 calls for the four core metrics, whatever the number of chunks):
  answer        statements of A with a support verdict each (faithfulness), and M questions A
                answers plus whether A is noncommittal (answer relevance), in ONE call
  ground_truth  a verdict per sentence of G (context recall) and per chunk (context precision)
When only one of faithfulness / answer relevance is asked for, its half of `answer` is asked alone
(answer_statements or generated_questions). Optional: context_relevance (contextual relevancy),
correctness (answer correctness). Fused mode: both in a single call per item.
Verdict lists are checked against what was asked: a wrong count makes that judgement a failure.
The judge's name carries a hash of its prompts and reply schemas, so an edit to them is a new judge.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict

from rag_eval_pipeline.core.defaults import DEFAULT_JUDGE_MODE, JUDGE_MODES
from rag_eval_pipeline.core.judging.judgement import (
    ANSWER_STATEMENTS,
    CHUNK_RELEVANCE,
    CONTEXT_RELEVANCE,
    CORRECTNESS,
    GENERATED_QUESTIONS,
    GROUND_TRUTH_SUPPORT,
    Correctness,
    Failure,
    GeneratedQuestions,
    Judgement,
    Verdict,
    add_usage,
)
from rag_eval_pipeline.core.judging.metrics import EvalItem
from rag_eval_pipeline.core.judging.results import NO_GROUND_TRUTH_FOR_RELEVANCE
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import RETRY_REMINDER, CallResult, LLMSettings, StructuredLLM, settle
from rag_eval_pipeline.core.text import is_noncommittal, split_sentences

# Which metrics each kind of call serves, for reporting token usage per metric.
CALL_SERVES = {
    "answer": ("faithfulness", "answer_relevance", "answer_correctness"),
    ANSWER_STATEMENTS: ("faithfulness", "answer_correctness"),
    GENERATED_QUESTIONS: ("answer_relevance",),
    "ground_truth": ("context_recall", "context_precision"),
    CONTEXT_RELEVANCE: ("contextual_relevancy",),
    CORRECTNESS: ("answer_correctness",),
    "fused_triad": ("faithfulness", "answer_relevance", "context_recall", "context_precision"),
}
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


def prompt_version(n_questions: int) -> str:
    """A short hash of everything that shapes what the judge is asked: templates, message layout,
    reply schemas, the reminder of a retried call and the number of questions. Computed, not bumped
    by hand, so no prompt edit can keep an old version."""
    material = {
        "prompts": PROMPTS,
        "schemas": {kind: schema.model_json_schema() for kind, schema in SCHEMAS.items()},
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

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        return asyncio.run(self._judge_all(items, needs))

    async def _judge_all(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        # Bounded concurrency keeps a vLLM server's batches full without flooding a small server.
        limit = asyncio.Semaphore(self.llm.settings.concurrency)
        self.llm.open()
        try:
            return await self.llm.run_all(self._judge(item, needs, limit) for item in items)
        finally:
            await self.llm.close()

    async def _judge(self, item: EvalItem, needs: set[str], limit: asyncio.Semaphore) -> Judgement:
        judgement = Judgement()
        truth = split_sentences(item.ground_truth)
        fields = _fields(item, truth, self.n_questions)

        async def call(kind: str, **more_fields) -> CallResult:
            messages = _messages(PROMPTS[kind].format(**fields, **more_fields))
            async with limit:
                result = await self.llm.call(kind, messages, SCHEMAS[kind])
            add_usage(judgement.usage, kind, result.usage)
            return result

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
        await settle(tasks)  # all of this item's calls end (and are cached) before a failure is raised
        if CORRECTNESS in needs:  # reuses the answer's statements, so it runs after them
            await self._correctness(item, truth, call, judgement)
        return judgement

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
