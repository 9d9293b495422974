"""The judge interface and the embedded offline judge.

The offline judge needs no server: statement support comes from model-free signals (numbers,
names, negation, relations that must agree with the context; see offline_support.py), answer
relevance and context relevance are embedding cosines. It is a weak judge and is reported as such;
the LLM judge implements the same interface. Where its signals are blind (long or paraphrased answers,
text in another language: benchmarks/judge_abstention.py) it abstains: the judgement is a Failure that
says so, and the metric is unmeasured rather than confidently wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.criteria import OFFLINE_CANNOT_GRADE, Criterion
from rag_eval_pipeline.core.judging.item import EvalItem
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
)
from rag_eval_pipeline.core.judging.offline_support import FACT_SIGNALS, assess_support
from rag_eval_pipeline.core.judging.results import (
    ABSTAINS_LONG_ANSWER,
    ABSTAINS_NOT_ENGLISH,
    ABSTAINS_PARAPHRASE,
    NO_GROUND_TRUTH_FOR_RELEVANCE,
)
from rag_eval_pipeline.core.text import (
    anchored_share,
    content_words,
    is_noncommittal,
    looks_non_english,
    split_sentences,
    word_count,
)


@dataclass(frozen=True)
class Support:
    """Whether one statement is backed by the contexts, and the evidence for the verdict."""

    statement: str
    supported: bool
    score: float  # graded confidence of support, >= 0.5 exactly when supported
    context_index: int | None
    note: str = ""
    signal: str = ""  # the offline signal that failed it (offline_support.SIGNALS); "" when supported


@dataclass(frozen=True)
class Abstention:
    """Where the offline judge declines to judge faithfulness. The thresholds were chosen on the tuning half of
    the labeled sets and checked on the held-out half (benchmarks/judge_abstention.py, docs/figures.md): above
    them its agreement with human labels was near chance, below them the short-answer sets lose almost nothing.
    Text in another language is declined by every judgement that reads it (see _READS)."""

    max_answer_words: int = 30
    min_paraphrase_words: int = 10  # distinct content words: a short answer is checked on its names and numbers
    min_anchored_share: float = 0.7  # share of the answer's content words found in the contexts

    def on_answer(self, answer: str, contexts: list[str], verified: list[Support]) -> str | None:
        """Why the verdicts on this answer's statements cannot be trusted, or None when they can."""
        if word_count(answer) > self.max_answer_words:
            return ABSTAINS_LONG_ANSWER.format(words=self.max_answer_words)
        if self._paraphrased(answer, contexts, verified):
            return ABSTAINS_PARAPHRASE.format(share=self.min_anchored_share)
        return None

    def _paraphrased(self, answer: str, contexts: list[str], verified: list[Support]) -> bool:
        # Rejected only for its wording: no statement failed on a wrong number, name or negation, so a
        # faithful paraphrase and a hallucination would get the same low score.
        failed = [v for v in verified if not v.supported]
        return (
            bool(failed)
            and not any(v.signal in FACT_SIGNALS for v in failed)
            and len(set(content_words(answer))) >= self.min_paraphrase_words
            and anchored_share(answer, contexts) < self.min_anchored_share
        )


DEFAULT_ABSTENTION = Abstention()

# The texts each judgement reads: in another language, the word signals and the English embedding model are
# blind to them, so the judgement is declined.
_READS: dict[str, tuple[str, ...]] = {
    ANSWER_STATEMENTS: ("answer", "contexts"),
    GENERATED_QUESTIONS: ("question", "answer"),
    GROUND_TRUTH_SUPPORT: ("ground truth", "contexts"),
    CHUNK_RELEVANCE: ("ground truth", "contexts"),
    CONTEXT_RELEVANCE: ("question", "contexts"),
    CORRECTNESS: ("answer", "ground truth"),
}


def _texts(item: EvalItem) -> dict[str, str]:
    return {
        "question": item.question,
        "answer": item.answer,
        "contexts": " ".join(item.context_texts),
        "ground truth": item.ground_truth,
    }


class Judge(Protocol):
    """Answers the primitive judgements (see judgement.py) the requested metrics need."""

    name: str

    def judge_many(self, items: list[EvalItem], needs: set) -> list[Judgement]: ...


class OfflineJudge:
    """Model-free support signals plus embedding similarity; deterministic, free, and weak (see the README)."""

    name = "offline-support-v3"  # v2 with abstention: the same verdicts where it judges at all
    relevance_threshold = 0.4  # cosine(question, context sentence) above which the sentence is on topic

    def __init__(self, embedder: Embedder, abstention: Abstention | None = DEFAULT_ABSTENTION):
        """abstention None: judge everything, as offline-support-v2 did (the benchmarks' comparison)."""
        self.embedder = embedder
        self.abstention = abstention
        base = "offline-support-v2" if abstention is None else type(self).name
        self.name = base + getattr(embedder, "judge_suffix", "")

    def judge_many(self, items: list[EvalItem], needs: set) -> list[Judgement]:
        if CONTEXT_RELEVANCE in needs:  # one batched embedding call instead of one per item
            sentences = [s for item in items for text in item.context_texts for s in self.statements(text)]
            self.embedder.embed(list(dict.fromkeys([item.question for item in items] + sentences)))
        return [self.judge(item, needs) for item in items]

    def judge(self, item: EvalItem, needs: set) -> Judgement:
        attributes = {"rag_eval.qa_id": item.qa_id, "rag_eval.judge": self.name, "input.value": item.question}
        with tracing.span(f"judge {item.qa_id}", tracing.EVALUATOR, attributes):
            judgement = self._judge(item, needs)
            judgement.trace = tracing.ids()
        return judgement

    def _judge(self, item: EvalItem, needs: set) -> Judgement:
        judgement = Judgement()
        declined = self._declined(item, needs)
        answer_statements = self.statements(item.answer)
        truth_sentences = self.statements(item.ground_truth)
        if ANSWER_STATEMENTS in needs:
            judgement.answer_statements = declined.get(ANSWER_STATEMENTS) or self._answer_verdicts(
                item, answer_statements
            )
        if GENERATED_QUESTIONS in needs:
            # No generator offline: the answer itself stands in for the questions it answers.
            judgement.generated_questions = declined.get(GENERATED_QUESTIONS) or GeneratedQuestions(
                [item.answer], is_noncommittal(item.answer), "offline: cosine(question, answer), no question generation"
            )
        if GROUND_TRUTH_SUPPORT in needs:
            judgement.ground_truth_support = declined.get(GROUND_TRUTH_SUPPORT) or self._verdicts(
                truth_sentences, item.context_texts, item.question
            )
        if CHUNK_RELEVANCE in needs:
            judgement.chunk_relevance = declined.get(CHUNK_RELEVANCE) or self._chunk_relevance(item, truth_sentences)
        if CONTEXT_RELEVANCE in needs:
            judgement.context_relevance = declined.get(CONTEXT_RELEVANCE) or self._relevant_to(
                item.question, item.context_texts
            )
        if CORRECTNESS in needs:
            judgement.correctness = declined.get(CORRECTNESS) or self._correctness(
                item, answer_statements, truth_sentences
            )
        for need in needs:
            if isinstance(need, Criterion):
                judgement.criteria[need.key] = Failure(OFFLINE_CANNOT_GRADE)
        return judgement

    def _declined(self, item: EvalItem, needs: set) -> dict[str, Failure]:
        """The judgements this item's language blinds, each with the text that is not English."""
        if self.abstention is None:
            return {}
        texts, foreign, declined = _texts(item), {}, {}
        for need in sorted(_READS.keys() & needs):
            for field in _READS[need]:
                if field not in foreign:
                    foreign[field] = looks_non_english(texts[field])
                if foreign[field]:
                    declined[need] = Failure(ABSTAINS_NOT_ENGLISH.format(field=field))
                    break
        return declined

    def _answer_verdicts(self, item: EvalItem, statements: list[str]) -> list[Verdict] | Failure:
        verified = self.verify(statements, item.context_texts, item.question)
        if verified and self.abstention is not None:
            if reason := self.abstention.on_answer(item.answer, item.context_texts, verified):
                return Failure(reason)
        return [Verdict(s.statement, int(s.supported), s.note) for s in verified]

    def _chunk_relevance(self, item: EvalItem, truth_sentences: list[str]) -> list[int] | Failure:
        if not truth_sentences:
            return Failure(NO_GROUND_TRUTH_FOR_RELEVANCE)
        return [
            int(any(v.supported for v in self.verify(truth_sentences, [text], item.question)))
            for text in item.context_texts
        ]

    def _correctness(self, item: EvalItem, answer_statements: list[str], truth_sentences: list[str]) -> Correctness:
        against_truth = self.verify(answer_statements, [item.ground_truth], item.question)
        return Correctness(
            true_positives=[v.statement for v in against_truth if v.supported],
            false_positives=[v.statement for v in against_truth if not v.supported],
            false_negatives=[
                v.statement for v in self.verify(truth_sentences, [item.answer], item.question) if not v.supported
            ],
        )

    def _verdicts(self, statements: list[str], contexts: list[str], question: str) -> list[Verdict]:
        return [Verdict(s.statement, int(s.supported), s.note) for s in self.verify(statements, contexts, question)]

    def _relevant_to(self, question: str, contexts: list[str]) -> list[Verdict]:
        sentences = [s for text in contexts for s in self.statements(text)]
        if not sentences:
            return []
        vectors = self.embedder.embed([question, *sentences])
        cosines = vectors[1:] @ vectors[0]
        return [Verdict(s, int(c >= self.relevance_threshold), f"cosine {c:.2f}") for s, c in zip(sentences, cosines)]

    def statements(self, text: str) -> list[str]:
        """Sentences that assert something: 'I don't know.' is not a claim to verify."""
        return [s for s in split_sentences(text) if content_words(s) and not is_noncommittal(s)]

    def verify(self, statements: list[str], contexts: list[str], question: str = "") -> list[Support]:
        """One verdict per statement from the model-free support signals (see offline_support.py)."""
        verdicts = []
        for statement in statements:
            found = assess_support(statement, contexts, question)
            verdicts.append(
                Support(statement, found.supported, found.score, found.context_index, found.note, found.signal)
            )
        return verdicts
