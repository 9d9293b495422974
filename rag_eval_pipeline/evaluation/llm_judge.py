"""The LLM judge: few, batched, schema-guided calls per item over any OpenAI-compatible server.

Decomposed mode (2 calls for the four core metrics, whatever the number of chunks):
  answer        statements of A with a support verdict each (faithfulness), and M questions A
                answers plus whether A is noncommittal (answer relevance), in ONE call
  ground_truth  a verdict per sentence of G (context recall) and per chunk (context precision)
When only one of faithfulness / answer relevance is asked for, its half of `answer` is asked alone
(answer_statements or generated_questions). Optional: context_relevance (contextual relevancy),
correctness (answer correctness). Fused mode: both in a single call per item.
Verdict lists are checked against what was asked: a wrong count makes that judgement a failure.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rag_eval_pipeline.evaluation.judgement import (
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
from rag_eval_pipeline.evaluation.judge_cache import JudgeCache
from rag_eval_pipeline.evaluation.llm_client import CallResult, LLMSettings, StructuredLLM
from rag_eval_pipeline.evaluation.metrics import EvalItem
from rag_eval_pipeline.text import split_sentences

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


def _numbered(texts: list[str]) -> str:
    return "\n".join(f"[{i + 1}] {text}" for i, text in enumerate(texts)) or "(none)"


class LLMJudge:
    def __init__(self, llm: StructuredLLM, mode: str = "decomposed", n_questions: int = 3):
        if mode not in ("decomposed", "fused"):
            raise ValueError(f"mode must be 'decomposed' or 'fused', got {mode!r}")
        self.llm, self.mode, self.n_questions = llm, mode, n_questions
        self.name = f"llm:{llm.settings.model}:{mode}"

    def judge_many(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        return asyncio.run(self._judge_all(items, needs))

    async def _judge_all(self, items: list[EvalItem], needs: set[str]) -> list[Judgement]:
        # Bounded concurrency keeps a vLLM server's batches full without flooding a small server.
        limit = asyncio.Semaphore(self.llm.settings.concurrency)
        self.llm.open()
        try:
            return await asyncio.gather(*(self._judge(item, needs, limit) for item in items))
        finally:
            await self.llm.close()

    async def _judge(self, item: EvalItem, needs: set[str], limit: asyncio.Semaphore) -> Judgement:
        judgement = Judgement()
        truth = split_sentences(item.ground_truth)

        async def call(kind, messages, schema) -> CallResult:
            async with limit:
                result = await self.llm.call(kind, messages, schema)
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
        await asyncio.gather(*tasks)
        if CORRECTNESS in needs:  # reuses the answer's statements, so it runs after them
            await self._correctness(item, truth, call, judgement)
        return judgement

    async def _answer(self, item, call, judgement) -> None:
        prompt = (
            "statements: split the ANSWER into short, self-contained factual statements; for each, verdict 1 if the "
            "CONTEXT directly supports it, 0 if not.\n"
            f"questions: {self.n_questions} different questions the ANSWER answers. noncommittal: true if the answer "
            "is evasive or says it does not know.\n\n"
            f"QUESTION: {item.question}\n\nCONTEXT:\n{_numbered(item.context_texts)}\n\nANSWER: {item.answer}"
        )
        result = await call("answer", _messages(prompt), AnswerJudgement)
        if result.parsed is None:
            judgement.answer_statements = judgement.generated_questions = Failure(result.failure)
            return
        judgement.answer_statements = _verdicts_or_failure(result) if item.answer.strip() else []
        judgement.generated_questions = GeneratedQuestions(
            [q for q in result.parsed.questions if q.strip()], result.parsed.noncommittal
        )

    async def _answer_statements(self, item, call, judgement) -> None:
        if not item.answer.strip():
            judgement.answer_statements = []
            return
        prompt = (
            "Split the ANSWER into short, self-contained factual statements. For each, verdict 1 if the CONTEXT "
            "directly supports it, 0 if not. Ignore the question when judging support.\n\n"
            f"QUESTION: {item.question}\n\nCONTEXT:\n{_numbered(item.context_texts)}\n\nANSWER: {item.answer}"
        )
        result = await call(ANSWER_STATEMENTS, _messages(prompt), StatementVerdicts)
        judgement.answer_statements = _verdicts_or_failure(result)

    async def _questions(self, item, call, judgement) -> None:
        prompt = (
            f"Write {self.n_questions} different questions that the ANSWER below answers. Set noncommittal to true "
            "if the answer is evasive or says it does not know.\n\n"
            f"ANSWER: {item.answer}"
        )
        result = await call(GENERATED_QUESTIONS, _messages(prompt), QuestionsFromAnswer)
        judgement.generated_questions = (
            Failure(result.failure) if result.parsed is None
            else GeneratedQuestions([q for q in result.parsed.questions if q.strip()], result.parsed.noncommittal)
        )

    async def _ground_truth(self, item, truth, call, judgement) -> None:
        if not truth:
            judgement.ground_truth_support = []
            judgement.chunk_relevance = Failure("no ground-truth answer to judge chunk relevance against")
            return
        prompt = (
            "For each numbered REFERENCE sentence, verdict 1 if the CONTEXT chunks support it, else 0 "
            f"(sentence_verdicts: exactly {len(truth)} values). For each numbered CONTEXT chunk, 1 if it is useful "
            f"for the reference answer, else 0 (chunk_relevance: exactly {len(item.contexts)} values).\n\n"
            f"QUESTION: {item.question}\n\nCONTEXT:\n{_numbered(item.context_texts)}\n\nREFERENCE:\n{_numbered(truth)}"
        )
        result = await call("ground_truth", _messages(prompt), GroundTruthVerdicts)
        judgement.ground_truth_support, judgement.chunk_relevance = _truth_and_chunks(result, truth, item)

    async def _context_relevance(self, item, call, judgement) -> None:
        if not item.contexts:
            judgement.context_relevance = []
            return
        prompt = (
            "Split the CONTEXT into short statements. For each, verdict 1 if it is relevant to answering the "
            f"QUESTION, else 0.\n\nQUESTION: {item.question}\n\nCONTEXT:\n{_numbered(item.context_texts)}"
        )
        result = await call(CONTEXT_RELEVANCE, _messages(prompt), StatementVerdicts)
        judgement.context_relevance = _verdicts_or_failure(result)

    async def _correctness(self, item, truth, call, judgement) -> None:
        statements = judgement.answer_statements
        if isinstance(statements, Failure):
            judgement.correctness = Failure(f"answer statements unavailable: {statements.reason}")
            return
        claims = [v.statement for v in statements or []]
        if not claims or not truth:
            judgement.correctness = Correctness([], claims, truth)
            return
        prompt = (
            f"answer_verdicts: for each of the {len(claims)} ANSWER statements, 1 if the REFERENCE supports it, else 0. "
            f"truth_verdicts: for each of the {len(truth)} REFERENCE sentences, 1 if the ANSWER states it, else 0.\n\n"
            f"ANSWER STATEMENTS:\n{_numbered(claims)}\n\nREFERENCE:\n{_numbered(truth)}"
        )
        result = await call(CORRECTNESS, _messages(prompt), CorrectnessVerdicts)
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
        prompt = (
            "Evaluate in one pass.\n"
            "statements: split the ANSWER into factual statements, verdict 1 if the CONTEXT supports each, else 0.\n"
            f"questions: {self.n_questions} questions the ANSWER answers; noncommittal: true if the answer is evasive.\n"
            f"sentence_verdicts: exactly {len(truth)} values, 1 if the CONTEXT supports each REFERENCE sentence.\n"
            f"chunk_relevance: exactly {len(item.contexts)} values, 1 if each CONTEXT chunk is useful for the reference.\n\n"
            f"QUESTION: {item.question}\n\nCONTEXT:\n{_numbered(item.context_texts)}\n\n"
            f"ANSWER: {item.answer}\n\nREFERENCE:\n{_numbered(truth)}"
        )
        result = await call("fused_triad", _messages(prompt), FusedTriad)
        if result.parsed is None:
            failure = Failure(result.failure)
            judgement.answer_statements = judgement.generated_questions = failure
            judgement.ground_truth_support = judgement.chunk_relevance = failure
            return
        parsed = result.parsed
        judgement.answer_statements = [Verdict(s.statement, s.verdict) for s in parsed.statements] if item.answer.strip() else []
        judgement.generated_questions = GeneratedQuestions([q for q in parsed.questions if q.strip()], parsed.noncommittal)
        truth_result = CallResult(GroundTruthVerdicts(sentence_verdicts=parsed.sentence_verdicts, chunk_relevance=parsed.chunk_relevance))
        judgement.ground_truth_support, judgement.chunk_relevance = (
            _truth_and_chunks(truth_result, truth, item) if truth
            else ([], Failure("no ground-truth answer to judge chunk relevance against"))
        )


def build_llm_judge(settings: LLMSettings, mode: str = "decomposed", cache_path: str | None = None) -> LLMJudge:
    """The LLM judge with its on-disk call cache (in memory when no path is given)."""
    return LLMJudge(StructuredLLM(settings, JudgeCache(cache_path or None)), mode=mode)


def _verdicts_or_failure(result: CallResult) -> list[Verdict] | Failure:
    if result.parsed is None:
        return Failure(result.failure)
    return [Verdict(s.statement, s.verdict) for s in result.parsed.statements]


def _truth_and_chunks(result: CallResult, truth: list[str], item: EvalItem):
    if result.parsed is None:
        return Failure(result.failure), Failure(result.failure)
    sentences, chunks = result.parsed.sentence_verdicts, result.parsed.chunk_relevance
    support = (
        [Verdict(t, v) for t, v in zip(truth, sentences)] if len(sentences) == len(truth)
        else Failure(f"{len(sentences)} verdicts for {len(truth)} reference sentences")
    )
    relevance = (
        list(chunks) if len(chunks) == len(item.contexts)
        else Failure(f"{len(chunks)} relevance verdicts for {len(item.contexts)} retrieved chunks")
    )
    return support, relevance


def _messages(prompt: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
