"""The embedded offline QA generator: template questions built from the corpus's own sentences.

No LLM, so it writes only what templates can write honestly:
- simple: one factual sentence of one chunk becomes the ground truth, and a template asks for it;
- multi_context: two chunks (another document first) that share a two-word term; the question asks
  what both say about it and the ground truth is one sentence from each;
- unanswerable: a question about a noun phrase of the chunk (an organisation, a programme, a town...)
  asking for a kind of fact that fits it (a budget, a population, a founding year) and that no chunk
  mentioning it states; the expected answer is a refusal (synthesis/absent_facts.py).
Every subject and topic is a noun phrase that stands on its own (synthesis/phrases.py), and each
template has several phrasings, one per task chosen from its id.
It does not write reasoning questions: a template cannot check that an inference is valid.
"""

from __future__ import annotations

import re
from collections import Counter

from rag_eval_pipeline.core.text import STOPWORDS, content_words, is_date, is_table_like, numbers, sha256
from rag_eval_pipeline.synthesis.absent_facts import frames_for, topic_phrases
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
from rag_eval_pipeline.synthesis.phrases import DANGLING_ENDS, phrase_problem
from rag_eval_pipeline.synthesis.planning import topic_terms
from rag_eval_pipeline.synthesis.test_nodes import factual_sentences

_DEFINITION = re.compile(
    r"^(?:The |An? )?(?P<term>[A-Z][\w'/-]*(?: [\w'/-]+){0,4}) (?P<verb>is|are) (?:the|a|an) ", re.U
)
_QUANTITY = re.compile(
    # "%" outside the closing \b: a word boundary never follows "%" before a space or a full stop.
    r"\b\d+(?:[.,]\d+)?\s*(?:%|(?:percent|days?|hours?|minutes?|seconds?|weeks?|months?|years?|ms|"
    r"milliseconds?|requests?|euros?|EUR|kg|metres?|meters?|GB|MB|employees?|people|times)\b)",
    re.I,
)
_VERB = re.compile(
    r"\b(is|are|was|were|must|may|can|cannot|will|should|shall|has|have|applies|apply|requires?|owns?|"
    r"receives?|needs?|runs?|uses?|takes?|sends?|starts?|ends?|covers?|includes?|returns?|allows?|means|refers|"
    r"contains?|provides?|gives?|makes?|shows?|became|becomes?|had|did|does|do)\b"
)
_CONNECTIVES = set(content_words("unless because although including however therefore example instead whether while"))
# A two-word term reads as a noun phrase where a determiner or a preposition stands before it.
_NOUN_PHRASE_OPENERS = frozenset(
    "the a an this that these those its their his her our your of for in on at by with from into about "
    "between among".split()  # not "to": "to remain consistent" is a verb, not a thing
)

# Several phrasings per template; each task takes one by its id, so a run is repeatable and a set varied.
_PHRASINGS = {
    "definition": (
        "What {verb} {term}?",
        'How does "{title}" define {term}?',
        'According to "{title}", what {verb} {term}?',
    ),
    "quantity": (
        'According to "{title}", what value fills the blank in "{blanked}"?',
        'In "{title}", which value completes the statement "{blanked}"?',
        'Which figure is missing from this statement in "{title}": "{blanked}"?',
    ),
    "subject": (
        "What does {where} say about {subject}?",
        "What does {where} tell the reader about {subject}?",
        "According to {where}, what is true of {subject}?",
    ),
    "shared-topic": (
        "What do {both} each say about {term}?",
        "How do {both} each describe {term}?",
        "What does each of {both} say about {term}?",
    ),
}


class OfflineGenerator:
    name = "offline-template"
    prompt_version = "template-v3"
    supported_types = (SIMPLE, MULTI_CONTEXT, UNANSWERABLE)
    # A template fails in microseconds, so walk further down the ranking than an LLM would.
    tries_per_item = 8

    def __init__(self, corpus_texts: list[str]):
        # Unanswerable questions must ask for facts the corpus never states about their topic.
        self._chunk_words = [set(content_words(text)) for text in corpus_texts]
        self._document_frequency = Counter(w for words in self._chunk_words for w in words)

    def generate(self, tasks: list[GenerationTask]) -> list[Outcome]:
        return [self._one(task) for task in tasks]

    def _one(self, task: GenerationTask) -> Outcome:
        write = {SIMPLE: self._simple, MULTI_CONTEXT: self._multi_context, UNANSWERABLE: self._unanswerable}.get(
            task.question_type
        )
        if write is None:
            return self._failure(task, f"the offline generator cannot write {task.question_type} questions")
        return write(task)

    def _failure(self, task: GenerationTask, reason: str) -> GenerationFailure:
        return GenerationFailure(task, self.name, reason)

    def _item(self, task: GenerationTask, question: str, ground_truth: str, template: str, topic: str):
        return make_item(
            task, " ".join(question.split()), ground_truth, self.name, self.prompt_version, template, topic
        )

    # simple ---------------------------------------------------------------------------------------
    def _simple(self, task: GenerationTask) -> Outcome:
        chunk = task.chunks[0]
        sentences = factual_sentences(chunk.text)
        if not sentences:
            return self._failure(task, "the chunk holds no factual sentence to ask about")
        # The most informative sentence a template fits.
        for sentence in sorted(sentences, key=_information, reverse=True):
            written = _simple_question(sentence, chunk, _variant(task))
            if written is not None:
                template, question, topic = written
                return self._item(task, question, sentence, template, topic)
        return self._failure(task, f"no template fits any of the chunk's {len(sentences)} factual sentences")

    # multi_context ---------------------------------------------------------------------------------
    def _multi_context(self, task: GenerationTask) -> Outcome:
        first, second = task.chunks[:2]
        both = _both(first, second)
        if both is None:
            return self._failure(task, "two chunks of one section: the question could not tell them apart")
        topic = self._shared_topic(first, second)
        if topic is None:
            return self._failure(task, "the two chunks share no noun phrase in their factual sentences")
        surface, sentence_a, sentence_b = topic
        question = _phrasing("shared-topic", _variant(task)).format(both=both, term=surface)
        return self._item(task, question, f"{sentence_a} {sentence_b}", "shared-topic", surface)

    def _shared_topic(self, first: SourceChunk, second: SourceChunk) -> tuple[str, str, str] | None:
        """The rarest two-word noun phrase both chunks state a fact about, with the most informative such
        sentence of each."""
        facts_a, facts_b = factual_sentences(first.text), factual_sentences(second.text)
        shared = {t for s in facts_a for t in topic_terms(s)} & {t for s in facts_b for t in topic_terms(s)}
        for term in sorted(
            (t for t in shared if self._specific(t, first, second)), key=lambda t: (self._frequency(t), -len(t), t)
        ):
            best_a = max((s for s in facts_a if term in topic_terms(s)), key=_information)
            best_b = max((s for s in facts_b if term in topic_terms(s)), key=_information)
            surface = _noun_phrase(term, best_a) or _noun_phrase(term, best_b)
            if surface:
                return surface, best_a, best_b
        return None

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
        topics = _topics(chunk)
        if not topics:
            return self._failure(
                task,
                "the chunk names nothing whose facts a template knows (an organisation, "
                "a programme, a method, a place, a building, a landmark, a road or a written work)",
            )
        start = _variant(task)
        for topic in topics:
            frames = frames_for(topic)
            for i in range(len(frames)):
                frame = frames[(start + i) % len(frames)]
                if not self._stated_anywhere(
                    set(content_words(topic)), {w for a in frame.answer_words for w in content_words(a)}
                ):
                    return self._item(task, frame.question.format(topic=topic), REFUSAL, "absent-fact", topic)
        return self._failure(
            task, f"every kind of fact the templates ask about {topics[0]!r} is mentioned in the corpus"
        )

    def _stated_anywhere(self, topic_words: set[str], answer_words: set[str]) -> bool:
        """Whether some chunk mentions the topic together with a word of the asked-for fact."""
        return any(topic_words <= words and answer_words & words for words in self._chunk_words)


def _variant(task: GenerationTask) -> int:
    """Which phrasing a task gets: from its id, so the same task reads the same in every run."""
    return int(sha256(task.task_id)[:8], 16)


def _phrasing(template: str, variant: int) -> str:
    phrasings = _PHRASINGS[template]
    return phrasings[variant % len(phrasings)]


def _simple_question(sentence: str, chunk: SourceChunk, variant: int) -> tuple[str, str, str] | None:
    """(template, question, topic) for the first template that fits the sentence, or None."""
    definition = _DEFINITION.match(sentence)
    if definition:
        term = _term(definition.group("term"))
        if phrase_problem(term, sentence) is None:
            question = _phrasing("definition", variant).format(
                verb=definition.group("verb"), term=term, title=chunk.title
            )
            return "definition", question, term
    quantities = _QUANTITY.findall(sentence)
    if len(quantities) == 1 and sentence[:1].isupper() and '"' not in sentence:
        blanked = sentence.replace(quantities[0], "____", 1)
        return "quantity", _phrasing("quantity", variant).format(title=chunk.title, blanked=blanked), ""
    subject = _subject(sentence)
    if subject:
        where = f'the "{chunk.heading}" section of "{chunk.title}"' if _section_named(chunk) else f'"{chunk.title}"'
        return "subject", _phrasing("subject", variant).format(where=where, subject=subject), subject
    return None


def _both(first: SourceChunk, second: SourceChunk) -> str | None:
    """How a multi-context question names its two sources: two documents, or two sections of one."""
    if first.doc_id != second.doc_id:
        return f'"{first.title}" and "{second.title}"'
    if _section_named(first) and _section_named(second) and first.heading != second.heading:
        return f'the "{first.heading}" and "{second.heading}" sections of "{first.title}"'
    return None


def _section_named(chunk: SourceChunk) -> bool:
    """A heading worth naming in a question: its own words, not the title, a date, a bare number, a line
    that trails off ('Commonly Confused Words and') or table cells read as one line."""
    heading = chunk.heading.strip()
    words = heading.lower().split()
    return (
        bool(heading)
        and heading != chunk.title
        and bool(content_words(heading))
        and not is_date(heading)
        and len(words) <= 10
        and not is_table_like(heading)
        and words[-1] not in DANGLING_ENDS
        and not re.search(r"[?!\"“”‘’()\[\]]", heading)
        and not _joined_cells(heading)
    )


def _joined_cells(heading: str) -> bool:
    """Cells of a table row that PDF extraction joined: a content word twice ('Proper nouns Common nouns'),
    or a capitalised word inside the line followed by a lowercase one ('United States country')."""
    words = [w for w in re.findall(r"[\w'’-]+", heading) if w.lower() not in STOPWORDS]
    repeated = len({w.lower() for w in words}) < len(words)
    inner = words[1:]
    mixed = any(a[:1].isupper() and b[:1].islower() for a, b in zip(inner, inner[1:]))
    return repeated or mixed


def _information(sentence: str) -> float:
    """Prefer sentences with checkable facts: quantities, numbers, names."""
    names = len(re.findall(r"(?<!^)(?<![.] )\b[A-Z][a-z]+", sentence))
    return 2 * len(_QUANTITY.findall(sentence)) + len(numbers(sentence)) + 0.5 * names + 0.01 * len(sentence)


def _subject(sentence: str) -> str | None:
    """The sentence's grammatical subject when it is a noun phrase that stands on its own."""
    match = _VERB.search(sentence)
    if not match:
        return None
    subject = _term(sentence[: match.start()].strip())
    return subject if phrase_problem(subject, sentence) is None else None


def _topics(chunk: SourceChunk) -> list[str]:
    """Noun phrases of the chunk's factual sentences that name a kind of thing the frames know, most
    informative sentence first."""
    seen: list[str] = []
    for sentence in sorted(factual_sentences(chunk.text), key=_information, reverse=True):
        seen += [p for p in topic_phrases(sentence) if p not in seen]
    return seen


def _noun_phrase(term: str, sentence: str) -> str | None:
    """The two-word term as the sentence writes it ('rate limits' for 'rate limit'), when it stands there
    as a noun phrase: after a determiner or a preposition, whole words, nothing dangling."""
    words = re.findall(r"[\w'’-]+", sentence)
    for i, (a, b) in enumerate(zip(words, words[1:])):
        if f"{' '.join(content_words(a))} {' '.join(content_words(b))}" != term:
            continue
        before = words[i - 1].lower() if i else ""
        phrase = " ".join([a, b, *_name_continues(words[i + 2 : i + 4])]) if b[:1].isupper() else f"{a} {b}"
        if before in _NOUN_PHRASE_OPENERS and phrase_problem(phrase, sentence) is None:
            return f"{before} {phrase}" if before in ("the", "a", "an") else phrase
    return None


def _name_continues(following: list[str]) -> list[str]:
    """The capitalised words that carry a name on ('Customer Shipment' + 'Data'): a name is not cut short."""
    taken = []
    for word in following:
        if not word[:1].isupper():
            break
        taken.append(word)
    return taken


def _term(text: str) -> str:
    """Lowercase a leading common word but keep names ('Economy class' -> 'economy class', 'Wayfarer' stays)."""
    first, _, rest = text.partition(" ")
    names_joined = re.match(r"(?:and|or|&) [A-Z]", rest)  # "Mary and Fred" is two names
    if first in ("The", "A", "An") or (first.istitle() and rest and rest[0].islower() and not names_joined):
        first = first.lower()
    return f"{first} {rest}".strip()
