"""The quality stage: is a question well formed enough that a reviewer would keep it?

It runs on every generated item before grounding, whoever wrote it (the offline templates or an LLM).
Grammar-level checks, each with the reason a reviewer would give:

  question form   ends with '?' (or with a quotation that displaced it), a question word or an
                  auxiliary opens it or a clause after a lead-in ("In which year ...", "According to X,
                  what ...", "If A, how ..."), starts with a capital letter
  subject         asks about something: content words beyond the question's own frame, and a topic
                  ("... about X?", "What is X?", or the topic a template filled in) that is a noun phrase
                  standing on its own (see `phrases.phrase_problem`)
  length          at least 4 words (the form stage bounds the maximum)
  fragments       no dangling last word ("... say about it?"), balanced quotes and brackets, no word
                  repeated twice in a row, no words run together by PDF extraction, no table debris quoted

A question that fails any check is rejected with its reason. The others get a quality score in [0, 1]:
1 minus small penalties for what a reviewer would still keep but rather rephrase (a long question, a
quoted fill-in-the-blank, a one-word topic). The score is a column of the golden set and the review sheet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag_eval_pipeline.core.text import STOPWORDS, content_words, is_date, is_table_like
from rag_eval_pipeline.synthesis.items import UNANSWERABLE
from rag_eval_pipeline.synthesis.phrases import DANGLING_IN_QUESTIONS, MAX_WORD_CHARS, phrase_problem

QUESTION_WORDS = frozenset("what which who whom whose when where why how".split())
AUXILIARIES = frozenset(
    "is are was were do does did can could should would will shall may might must has have had isn't aren't "
    "wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't hasn't haven't".split()
)
_PREPOSITION_THEN_QUESTION_WORD = re.compile(
    r"^(?:(?:in|into|on|at|for|from|to|by|with|under|during|since|of)\s+(?:what|which|whom|whose|how)"
    r"|(?:approximately|roughly|about|around|exactly)\s+(?:how|what|when))\b",
    re.I,
)
# A clause before the question proper: "According to X, what ...", "If A, how ...", "Suppose A. What ...".
_LEAD_IN_WORDS = frozenset(
    "according if after before given suppose supposing assuming assume comparing considering based in for "
    "under with between during when since once while unless although apart besides from by at on as".split()
)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")
_TOPIC = r"(?P<topic>[^?\"“”]+?)\s*\?$"
# Where a question names what it is about, after any lead-in: "... about X?", "What is X?", "What is true of X?".
_TOPIC_PATTERNS = (
    re.compile(rf"\b(?:about|regarding|concerning) {_TOPIC}"),
    re.compile(rf"(?:^|[,:;.] )(?:[Ww]hat|[Ww]ho) (?:is|are|was|were) (?:true of |known about )?{_TOPIC}"),
    re.compile(rf"\b(?:describe|define) {_TOPIC}"),
)
# Words of the question's frame that say nothing about its subject.
_FRAME_WORDS = set(content_words("say says said according describe define defined value fills blank each state stated"))
MIN_QUESTION_WORDS = 4
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")  # and the full-width and Arabic question marks
# A quoted "title" or "section" that is a page number, a page counter or a date was read off a page's edge.
_PAGE_FURNITURE = re.compile(
    r"^\s*(?:(?:[Pp]age|p\.)\s*)?\d+(?:\s*(?:/|of)\s*\d+)?\s*$|^\s*[Pp]age\s+\d+|^\s*[-\u2013\u2014]\s*\d+\s*[-\u2013\u2014]\s*$"
    r"|^\s*[ivxlc]{1,6}\s*$"
)  # lowercase roman numerals only: "C" or "X" may be a real name


@dataclass(frozen=True)
class Assessment:
    score: float  # 0 when rejected
    problem: str | None = None  # the reason for the rejection, None when kept
    notes: tuple[str, ...] = field(default=())  # what the score's penalties were for


@dataclass(frozen=True)
class QualityContext:
    """What the checks compare a question with: its chunks' texts and the corpus's section names."""

    source: str = ""  # the texts of the chunks the item was written from
    section_names: frozenset[str] = frozenset()


def assess(
    question: str, question_type: str, topic: str = "", context: QualityContext = QualityContext()
) -> Assessment:
    """The quality of one question; `topic` is what a template filled in ("" when unknown).

    The grammar checks are English; a question in another language (an LLM may write one for a corpus
    in that language) is checked only for its length, a question mark and table debris.
    """
    text = str(question).strip()
    question_form = _has_question_form(text)
    if not _reads_as_english(text, question_form):
        problem = _foreign_form_problem(text)
        return Assessment(0.0, problem) if problem else Assessment(1.0)
    problem = (
        _form_problem(text, question_form)
        or _fragment_problem(text)
        or _subject_problem(text, question_type, topic, context)
    )
    if problem:
        return Assessment(0.0, problem)
    notes = _penalties(text, topic)
    return Assessment(round(max(0.0, 1.0 - sum(p for p, _ in notes)), 2), None, tuple(n for _, n in notes))


def _has_question_form(text: str) -> bool:
    """A question word or an auxiliary opens it, or opens a clause after a lead-in."""
    return bool(text.split()) and (_opens_a_question(text) or _after_a_lead_in(text))


def _form_problem(text: str, question_form: bool) -> str | None:
    words = text.split()
    if len(words) < MIN_QUESTION_WORDS:
        return f"too short to name its subject ({len(words)} words)"
    if not text.rstrip("\"'”’)]").endswith(_QUESTION_MARKS) and not _ends_in_a_quotation(text):
        return "not a question: it does not end with '?'"
    if not text[:1].isupper() and not text[:1].isdigit():
        return "does not start with a capital letter"
    if not question_form:
        return f"not a question: no question word or auxiliary opens it ({words[0]!r})"
    return None


def _after_a_lead_in(text: str) -> bool:
    """A question word opens a clause after a lead-in ("According to X, what ...", "If A, how ...",
    "Suppose A. What ..."); a statement that merely ends in '?' does not start with a lead-in word."""
    first = text.split()[0].lower().strip("\"'“”(,")
    if first not in _LEAD_IN_WORDS and not first.endswith("ing"):
        return False
    clauses = re.split(r"[,:;.]\s+", text)[1:]
    if first == "according" and len(clauses) == 0:  # "According to the report what ..." without its comma
        return bool(re.search(r"\b(?:what|which|who|when|where|why|how)\b", text, re.I))
    return any(_opens_a_question(clause) for clause in clauses)


def _ends_in_a_quotation(text: str) -> bool:
    """'What value fills the blank: "..."': a question whose '?' a quotation at its end displaced."""
    return text.endswith(('"', "”")) and bool(_QUOTED.search(text)) and text.count('"') % 2 == 0


def _foreign_form_problem(text: str) -> str | None:
    """The checks that hold in any language: enough letters, a question mark, no table debris."""
    spaced = len(text.split()) >= 3 or not re.search(r"[A-Za-z]", text)  # Chinese or Japanese need no spaces
    if not spaced or sum(ch.isalpha() for ch in text) < 6:
        return "too short to name its subject"
    if is_table_like(text.rstrip("?\uff1f\u061f")):
        return "numbers or table cells, not a question"
    if not text.rstrip("\"'”’)]").endswith(_QUESTION_MARKS):
        return "not a question: it does not end with a question mark"
    return None


def _opens_a_question(clause: str) -> bool:
    first = clause.split()[0].lower().strip("\"'“”(") if clause.split() else ""
    first = re.sub(r"['’]s$", "", first)  # "What's", "Who's"
    return first in QUESTION_WORDS | AUXILIARIES or bool(_PREPOSITION_THEN_QUESTION_WORD.match(clause))


def _reads_as_english(text: str, question_form: bool) -> bool:
    """Opens like an English question, or a quarter of its words are English function words: then the
    English grammar checks apply. A Dutch or German question shares a word or two ("in", "a") at most."""
    words = re.findall(r"[a-z']+", text.lower())
    if not words:
        return False
    return question_form or sum(w in STOPWORDS for w in words) / len(words) >= 0.25


def _fragment_problem(text: str) -> str | None:
    # A pronoun may end a question ("... which authority enforces it?"); the topic rules catch "... about it?".
    last = re.findall(r"[\w'’]+", _QUOTED.sub(" ", text).split("?")[0])
    if last and last[-1].lower() in DANGLING_IN_QUESTIONS:
        return f"a dangling fragment: it ends in {last[-1]!r}"
    if text.count('"') % 2 or text.count("“") != text.count("”") or text.count("(") != text.count(")"):
        return "unbalanced quotes or brackets"
    lowered = re.findall(r"\w+(?:-\w+)*", _QUOTED.sub(" | ", text).lower())  # "Baden-Baden" is one word
    repeated = next((a for a, b in zip(lowered, lowered[1:]) if a == b and not a.isdigit()), None)
    if repeated:
        return f"a word repeated twice in a row ({repeated!r})"
    if any(len(w.strip("\"'“”.,?")) > MAX_WORD_CHARS and "/" not in w for w in text.split()):
        return "words run together (text extracted without spaces)"
    for quoted in _QUOTED.findall(text):
        inner = quoted.strip('"“”')
        if "____" in quoted and is_table_like(inner.replace("____", " ")):
            return "the quoted statement is table debris, not a sentence"
        if "____" not in quoted and (_PAGE_FURNITURE.match(inner) or is_date(inner)):
            return f"names its source by page furniture ({quoted}), not by a title or section"
    return None


def _subject_problem(text: str, question_type: str, topic: str, context: QualityContext) -> str | None:
    outside_quotes = _QUOTED.sub(" ", text)
    if not set(content_words(outside_quotes)) - _FRAME_WORDS and "____" not in text:
        return "no subject: the question asks about nothing in particular"
    sections = context.section_names if question_type == UNANSWERABLE else frozenset()
    source = context.source or None
    if topic:
        problem = phrase_problem(topic, source, sections)
        return f"its topic {problem}" if problem else None
    extracted = _extracted_topic(text)
    if extracted:
        problem = phrase_problem(extracted, source, sections, whole=False)
        return f"its topic {problem}" if problem else None
    return None


def _extracted_topic(text: str) -> str | None:
    for pattern in _TOPIC_PATTERNS:
        match = pattern.search(text)
        if match:  # "What is the GDPR and which authority enforces it?" asks about "the GDPR"
            return re.split(r",? and (?:which|what|who|whom|how|when|where|why)\b", match.group("topic"))[0].strip()
    return None


def _penalties(text: str, topic: str) -> list[tuple[float, str]]:
    notes = []
    n_words = len(text.split())
    if n_words > 25:
        notes.append((0.1 if n_words <= 40 else 0.2, f"long question ({n_words} words)"))
    if "____" in text:
        notes.append((0.15, "a fill-in-the-blank exercise rather than a question"))
    quoted = max((len(q.split()) for q in _QUOTED.findall(text)), default=0)
    if quoted > 20:
        notes.append((0.1, f"quotes {quoted} words"))
    if topic and len(topic.split()) == 1:
        notes.append((0.1, "one-word topic"))
    if "  " in text:
        notes.append((0.05, "double spaces"))
    if _ends_in_a_quotation(text):
        notes.append((0.05, "no question mark after the closing quotation"))
    return notes
