"""The embedded offline QA generator: template questions built from the corpus's own sentences.

No LLM, so it writes only what templates can write honestly:
- simple: one factual sentence of one chunk becomes the ground truth, and a template asks for it;
- multi_context: two chunks (another document first) that share a two-word term; the question asks
  what both say about it and the ground truth is one sentence from each;
- unanswerable: a question about the chunk's topic asking for a kind of fact (a budget, a year, a
  contact person...) that no chunk mentioning the topic states; the expected answer is a refusal.
It does not write reasoning questions: a template cannot check that an inference is valid.
"""

from __future__ import annotations

import re
from collections import Counter

from rag_eval_pipeline.synthesis.items import (
    MULTI_CONTEXT,
    REFUSAL,
    SIMPLE,
    UNANSWERABLE,
    GenerationFailure,
    GenerationTask,
    Outcome,
    SourceChunk,
    make_item,
)
from rag_eval_pipeline.synthesis.planning import topic_terms
from rag_eval_pipeline.synthesis.test_nodes import factual_sentences
from rag_eval_pipeline.core.text import content_words, numbers, sha256

_DEFINITION = re.compile(r"^(?:The |An? )?(?P<term>[A-Z][\w'/-]*(?: [\w'/-]+){0,4}) (?:is|are) (?:the|a|an) ", re.U)
_QUANTITY = re.compile(
    # "%" outside the closing \b: a word boundary never follows "%" before a space or a full stop.
    r"\b\d+(?:[.,]\d+)?\s*(?:%|(?:percent|days?|hours?|minutes?|seconds?|weeks?|months?|years?|ms|"
    r"milliseconds?|requests?|euros?|EUR|kg|metres?|meters?|GB|MB|employees?|people|times)\b)",
    re.I,
)
_VERB = re.compile(
    r"\b(is|are|was|were|must|may|can|cannot|will|should|shall|has|have|applies|apply|requires?|owns?|"
    r"receives?|needs?|runs?|uses?|takes?|sends?|starts?|ends?|covers?|includes?|returns?|allows?)\b"
)
_VAGUE_START = {"this", "these", "that", "those", "it", "they", "there", "each", "every", "all", "any", "such"}
_VAGUE_END = {"that", "which", "who", "whose", "where", "when"}
_CONNECTIVES = set(content_words("unless because although including however therefore example instead whether while"))

# Kinds of fact a reader may plausibly ask about any topic, with the words that would state them.
_UNANSWERABLE_FRAMES = (
    ("What was the total budget spent on {topic} last year?", ("budget",)),
    ("In which year was the current approach to {topic} first introduced?", ("introduced", "year")),
    ("How many complaints about {topic} were received in the last quarter?", ("complaint", "quarter")),
    ("Which external auditor last reviewed {topic}?", ("auditor",)),
    ("What is the phone number of the person responsible for {topic}?", ("phone",)),
    ("What customer satisfaction score did {topic} reach in the latest survey?", ("satisfaction", "survey")),
)


class OfflineGenerator:
    name = "offline-template"
    prompt_version = "template-v2"
    supported_types = (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)

    def __init__(self, corpus_texts: list[str]):
        # Unanswerable questions must ask for facts the corpus never states about their topic.
        self._chunk_words = [set(content_words(text)) for text in corpus_texts]
        self._document_frequency = Counter(w for words in self._chunk_words for w in words)

    def generate(self, tasks: list[GenerationTask]) -> list[Outcome]:
        return [self._one(task) for task in tasks]

    def _one(self, task: GenerationTask) -> Outcome:
        write = {SIMPLE: self._simple, MULTI_CONTEXT: self._multi_context, UNANSWERABLE: self._unanswerable}.get(task.question_type)
        if write is None:
            return self._failure(task, f"the offline generator cannot write {task.question_type} questions")
        return write(task)

    def _failure(self, task: GenerationTask, reason: str) -> GenerationFailure:
        return GenerationFailure(task, self.name, reason)

    def _item(self, task: GenerationTask, question: str, ground_truth: str, template: str):
        return make_item(task, question, ground_truth, self.name, self.prompt_version, template)

    # simple ---------------------------------------------------------------------------------------
    def _simple(self, task: GenerationTask) -> Outcome:
        chunk = task.chunks[0]
        sentences = factual_sentences(chunk.text)
        if not sentences:
            return self._failure(task, "the chunk holds no factual sentence to ask about")
        # The most informative sentence a template fits.
        for sentence in sorted(sentences, key=_information, reverse=True):
            template, question = _simple_question(sentence, chunk)
            if question is not None:
                return self._item(task, question, sentence, template)
        return self._failure(task, f"no template fits any of the chunk's {len(sentences)} factual sentences")

    # multi_context ---------------------------------------------------------------------------------
    def _multi_context(self, task: GenerationTask) -> Outcome:
        first, second = task.chunks[:2]
        topic = self._shared_topic(first, second)
        if topic is None:
            return self._failure(task, "the two chunks share no two-word term in their factual sentences")
        term, sentence_a, sentence_b = topic
        surface = _surface(term, sentence_a)
        if first.doc_id != second.doc_id:
            question = f'What do "{first.title}" and "{second.title}" each say about {surface}?'
        elif first.heading and second.heading and first.heading != second.heading:
            question = f'What do the "{first.heading}" and "{second.heading}" sections of "{first.title}" each say about {surface}?'
        else:
            return self._failure(task, "two chunks of one section: the question could not tell them apart")
        return self._item(task, question, f"{sentence_a} {sentence_b}", "shared-topic")

    def _shared_topic(self, first: SourceChunk, second: SourceChunk) -> tuple[str, str, str] | None:
        """The rarest two-word term both chunks state a fact about, with the most informative such sentence of each."""
        facts_a, facts_b = factual_sentences(first.text), factual_sentences(second.text)
        shared = {t for s in facts_a for t in topic_terms(s)} & {t for s in facts_b for t in topic_terms(s)}
        shared = {t for t in shared if self._specific(t, first, second)}
        if not shared:
            return None
        term = min(shared, key=lambda t: (self._frequency(t), -len(t), t))
        best_a = max((s for s in facts_a if term in topic_terms(s)), key=_information)
        best_b = max((s for s in facts_b if term in topic_terms(s)), key=_information)
        return term, best_a, best_b

    def _specific(self, term: str, first: SourceChunk, second: SourceChunk) -> bool:
        """Not a connective ('days unless'), not the documents' own name, not in a quarter of all chunks."""
        words = term.split()
        in_titles = all(w in content_words(f"{first.title} {second.title}") for w in words)
        common = self._frequency(term) > max(2, len(self._chunk_words) // 4)
        return not (set(words) & _CONNECTIVES or in_titles or common)

    def _frequency(self, term: str) -> int:
        """Chunks holding both words of the term: a proxy for how common the topic is."""
        first, second = term.split()
        return min(self._document_frequency[first], self._document_frequency[second])

    # unanswerable ----------------------------------------------------------------------------------
    def _unanswerable(self, task: GenerationTask) -> Outcome:
        chunk = task.chunks[0]
        topic = _topic(chunk)
        if topic is None:
            return self._failure(task, "the chunk names no topic to ask about")
        topic_words = set(content_words(topic))
        start = int(sha256(chunk.chunk_id)[:8], 16)  # vary the frame across chunks, the same in every run
        for i in range(len(_UNANSWERABLE_FRAMES)):
            frame, answer_words = _UNANSWERABLE_FRAMES[(start + i) % len(_UNANSWERABLE_FRAMES)]
            if not self._stated_anywhere(topic_words, {w for a in answer_words for w in content_words(a)}):
                return self._item(task, frame.format(topic=topic), REFUSAL, "absent-fact")
        return self._failure(task, f"every kind of fact the templates ask about {topic!r} is mentioned in the corpus")

    def _stated_anywhere(self, topic_words: set[str], answer_words: set[str]) -> bool:
        """Whether some chunk mentions the topic together with a word of the asked-for fact."""
        return any(topic_words <= words and answer_words & words for words in self._chunk_words)


def _simple_question(sentence: str, chunk: SourceChunk) -> tuple[str, str | None]:
    definition = _DEFINITION.match(sentence)
    if definition:
        return "definition", f"What is {_term(definition.group('term'))}?"
    quantities = _QUANTITY.findall(sentence)
    if len(quantities) == 1:
        blanked = sentence.replace(quantities[0], "____", 1)
        return "quantity", f'According to "{chunk.title}", what value fills the blank: "{blanked}"'
    subject = _subject(sentence)
    if subject:
        where = f'the "{chunk.heading}" section of "{chunk.title}"' if chunk.heading and chunk.heading != chunk.title else f'"{chunk.title}"'
        return "subject", f"What does {where} say about {subject}?"
    return "none", None


def _information(sentence: str) -> float:
    """Prefer sentences with checkable facts: quantities, numbers, names."""
    names = len(re.findall(r"(?<!^)(?<![.] )\b[A-Z][a-z]+", sentence))
    return 2 * len(_QUANTITY.findall(sentence)) + len(numbers(sentence)) + 0.5 * names + 0.01 * len(sentence)


def _subject(sentence: str) -> str | None:
    match = _VERB.search(sentence)
    if not match:
        return None
    subject = sentence[: match.start()].strip().rstrip(",")
    words = subject.split()
    if not 1 <= len(words) <= 7 or not content_words(subject):
        return None
    # "this policy", "it", "every team that" do not name what the question is about.
    if words[0].lower() in _VAGUE_START or words[-1].lower() in _VAGUE_END:
        return None
    return _term(subject)


def _topic(chunk: SourceChunk) -> str | None:
    """What the chunk is about: its section heading when it has a short one, else its main subject."""
    heading = chunk.heading.strip().rstrip(":")
    if heading and heading != chunk.title and 1 <= len(heading.split()) <= 6 and content_words(heading):
        return _term(heading)
    for sentence in sorted(factual_sentences(chunk.text), key=_information, reverse=True):
        subject = _subject(sentence)
        if subject:
            return subject
    return None


def _surface(term: str, sentence: str) -> str:
    """The term as the sentence writes it ('rate limits' for 'rate limit')."""
    words = re.findall(r"[\w'-]+", sentence)
    for a, b in zip(words, words[1:]):
        if f"{' '.join(content_words(a))} {' '.join(content_words(b))}" == term:
            phrase = f"{a} {b}"
            return _term(phrase) if sentence.startswith(a) else phrase
    return term


def _term(text: str) -> str:
    """Lowercase a leading common word but keep names ('Economy class' -> 'economy class', 'Wayfarer' stays)."""
    first, _, rest = text.partition(" ")
    if first in ("The", "A", "An") or (first.istitle() and rest and rest[0].islower()):
        first = first.lower()
    return f"{first} {rest}".strip()
