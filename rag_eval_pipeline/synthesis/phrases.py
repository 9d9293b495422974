"""Whether a phrase names something a reader can ask about: the checks the offline templates use when they
pick a subject or topic, and the quality stage uses on every question's topic (whoever wrote it).

No part-of-speech model can be installed offline here, so these are word-list and shape rules. They are
deliberately strict: a template that finds no good phrase writes no question, which costs one task, while a
question about "There", "TIP: When observing tests it" or "improvement w" costs a reviewer's trust.
"""

from __future__ import annotations

import re

from rag_eval_pipeline.core.text import STOPWORDS, content_words, is_date, is_table_like

PRONOUNS = frozenset(
    "i me my mine we us our ours you your yours he him his she her hers it its they them their theirs one ones "
    "myself yourself himself herself itself ourselves themselves someone something anyone anything everyone "
    "everything nobody nothing somebody everybody".split()
)
EXPLETIVES = frozenset({"there", "here"})
DEMONSTRATIVES = frozenset({"this", "that", "these", "those", "such"})
QUANTIFIERS = frozenset(
    "all every each some any many most few several both either neither much more less no plenty lots none "
    "one two three four five six seven eight nine ten dozens hundreds thousands".split()
)
ARTICLES = frozenset({"the", "a", "an"})
# A phrase starting with one of these is a clause or an adverbial, not a thing: "When observing tests it".
CLAUSE_STARTS = frozenset(
    "when if because while although though since unless after before as where whether once until whenever "
    "so then thus however therefore also only even just about along at for in on by with from into onto over "
    "under to of than like not yet still instead perhaps usually often apparently again and or but nor beyond "
    "during up down across through around behind near towards toward outside inside beneath against "
    "throughout without within upon among past below above between".split()
)
# A phrase holding one of these has a clause inside it: "the news that the Martians", "determine if the noun".
CLAUSE_WORDS = frozenset("that which who whom whose if when where whether because while unless".split())
# A phrase ending in one of these trails off: "connection between", "every team that".
DANGLING_ENDS = frozenset(
    "the a an of to in on at by for with from into about between and or but nor that which who whom whose "
    "where when than as is are was were be been being has have had do does did will would can could may "
    "might must shall should not its their his her our your my this these those such very what why how still "
    "also only even just too yet again already always never often then now".split()
)
# What a question, or a topic read back out of one, may not end in; a preposition may end a question
# ("Who is the report addressed to?").
DANGLING_IN_QUESTIONS = frozenset(
    "the a an and or but nor of that which than whose its their his her our your my this these those very what".split()
)
# "the following test", "the same rule": which one depends on text the question does not carry.
POINTING_MODIFIERS = frozenset(
    "following previous above below same other former latter next last first second third fourth fifth sixth "
    "seventh eighth ninth tenth".split()
)
# Adjectives a two-word term can end in when it is cut from a longer phrase ("a little black")...
ADJECTIVE_ENDS = frozenset(
    "black white red green blue grey gray little big small large good bad new old possible consistent "
    "different important available whole entire certain "
    # and verbs, when a term is cut from a clause ("a sentence write", "remain consistent")
    "write remain use make take give keep need show go come get".split()
)
# Head nouns too general to name anything: "a quick way", "the good news", "the bottom line".
VAGUE_HEADS = frozenset(
    "way ways thing things stuff lot bit kind sort part point fact case news line matter idea rest".split()
)
_LABEL = re.compile(r"^[\w .()-]{1,20}:(\s|$)")  # "TIP:", "Note:", "Step 1:" at the start
_SECTION_NUMBER = re.compile(
    r"^(?:chapter|section|part|appendix|page|unit|lesson|figure|table|step)\s+[\dIVXLCivxlc]+[a-z]?\b", re.I
)
# A word longer than this is PDF text whose spaces were lost ("Inawelfarestate,howshallwedeal"), not a word.
MAX_WORD_CHARS = 24
MAX_PHRASE_WORDS = 8
_PHRASE_WORD = re.compile(r"[\w][\w'’.-]*", re.U)


def phrase_problem(
    phrase: str, source: str | None = None, section_names: frozenset[str] = frozenset(), whole: bool = True
) -> str | None:
    """Why `phrase` is not a noun phrase that stands on its own, or None when it is.

    `source` (the text it was taken from) catches terms cut mid-word; `section_names` (normalised, lowercase)
    catches a section's name used as a topic. `whole=False` is for a topic read back out of a finished
    question ("... about X?") in its writer's own words: it may be long, hold a comma, a clause, a date or a
    section number, and need not copy the source; pronouns, labels, broken words and dangling ends still count.
    """
    text = " ".join(str(phrase).split()).strip(" ,;")
    words = text.split()
    if not words:
        return "names nothing (empty)"
    lower = [w.lower().strip("\"'“”‘’()[],.;") for w in words]
    if is_date(text) and whole:
        return f"a date, not a thing: {text!r}"
    shape = _shape_problem(text, words) if whole else _word_problem(text, words)
    if shape:
        return shape
    if lower[0] in PRONOUNS or all(w in PRONOUNS | EXPLETIVES | DEMONSTRATIVES | ARTICLES for w in lower):
        return f"a pronoun, not a thing: {text!r}"
    if lower[0] in EXPLETIVES:
        return f"an expletive ('{words[0]}'), not a thing: {text!r}"
    if lower[0] in DEMONSTRATIVES:
        return f"points back at something unnamed ('{words[0]} ...'): {text!r}"
    if lower[0] in QUANTIFIERS and (whole or len(words) <= 2):
        return f"a quantifier phrase ('{words[0]} ...'), not a thing: {text!r}"
    if lower[0] in CLAUSE_STARTS:
        return f"a clause or adverbial ('{words[0]} ...'), not a noun phrase: {text!r}"
    trailing = DANGLING_ENDS if whole else DANGLING_IN_QUESTIONS  # "Who is the report addressed to?" is fine
    if lower[-1] in trailing or lower[-1] in PRONOUNS or lower[-1] in EXPLETIVES:
        return f"trails off ('... {words[-1]}'): {text!r}"
    if not content_words(text):
        return f"names nothing (only function words): {text!r}"
    if any(w in ("The", "A", "An") for w in words[1:]):
        return f"two fragments run together (a capitalised article inside): {text!r}"
    if len(lower) > 1 and lower[0] in ARTICLES and words[1].islower() and lower[1] in POINTING_MODIFIERS:
        return f"points back at something unnamed ('{words[1]} ...'): {text!r}"
    if whole and words[-1].islower() and lower[-1] in ADJECTIVE_ENDS:  # "Bethnal Green" is a name
        return f"ends in an adjective or a verb, not a thing: {text!r}"
    if whole and lower[-1] in VAGUE_HEADS and len(words) <= 3:
        return f"too general to name anything ('{words[-1]}'): {text!r}"
    pointer = next((w for w in lower[1:] if w in DEMONSTRATIVES - {"such"}), None)
    if pointer and whole:
        return f"points back at something unnamed ('{pointer} ...'): {text!r}"
    clause = next((w for w in lower[1:] if w in CLAUSE_WORDS), None)
    if clause and whole:
        return f"holds a clause ('{clause} ...'), not just a noun phrase: {text!r}"
    if lower[0] == "the" and len(words) == 2 and words[-1].isalpha() and words[-1].islower():
        return f"a definite reference to something unnamed: {text!r}"
    if not whole:  # a topic in an LLM's own words: "Section 230", "Q3 2021", "contact info" are fine there
        return None
    if _SECTION_NUMBER.match(text) or normalise_heading(text) in section_names:
        return f"a section's name, not a thing: {text!r}"
    if source is not None:
        cut = _cut_word(words, source)
        if cut:
            return f"a word cut short ({cut!r}): {text!r}"
    return None


def _shape_problem(text: str, words: list[str]) -> str | None:
    if len(words) > MAX_PHRASE_WORDS:
        return f"too long for a topic ({len(words)} words): {text[:60]!r}"
    word_problem = _word_problem(text, words)
    if word_problem:
        return word_problem
    if re.search(r"[,;:()\[\]{}]|\?|!", text) or text.count('"') % 2:
        return f"holds punctuation a noun phrase does not: {text!r}"
    if is_table_like(text) or sum(c.isdigit() for c in text) > len(text) / 3:
        return f"numbers or table cells, not a thing: {text!r}"
    return None


def _word_problem(text: str, words: list[str]) -> str | None:
    if _LABEL.match(text):
        return f"a label ({text.split(':')[0]}:), not a thing: {text!r}"
    if any(len(w) > MAX_WORD_CHARS for w in words):
        return f"run-together words (text extracted without spaces): {text[:60]!r}"
    if any(len(w) == 1 and w.isalpha() and w.islower() and w != "a" for w in words):  # "vitamin D" is fine
        return f"a single letter standing as a word (a word cut short?): {text!r}"
    if re.search(r"\w- \w|\w[\u2014\u2013]\w", text):
        return f"a word broken at a line end, or two run together by a dash: {text!r}"
    if re.search(r"[\u201e\u201f\u200b-\u200f\ufeff\ufffd]", text):
        return f"odd characters from text extraction: {text!r}"
    fragment = next(
        (
            w
            for before, w in zip([""] + words, words)
            if len(w) == 2 and w.islower() and w.isalpha() and w not in _TWO_LETTER_WORDS and not before[-1:].isdigit()
        ),
        None,
    )  # "5 km" is a measure
    if fragment:
        return f"a word cut short or broken ({fragment!r}): {text!r}"
    if re.match(r"\d[\d.,]*\s+(?:of\s+\d|[A-Z])", text):
        return f"starts with a page number run into the text: {text!r}"
    return None


def _cut_word(words: list[str], source: str) -> str | None:
    """A word of the phrase that the source holds only as the start of a longer word ('improvement w' of
    'work'). A word the source lacks altogether is someone's own wording, not a cut."""
    source_words = {w.lower().strip(".'’-") for w in _PHRASE_WORD.findall(source)}
    for word in words:
        bare = word.strip("\"'“”‘’.,").lower()
        if not bare or bare in source_words or bare in STOPWORDS or any(bare in w.split("-") for w in source_words):
            continue
        if any(w.startswith(bare) and w[len(bare) :] not in _INFLECTIONS for w in source_words):
            return word
    return None


_TWO_LETTER_WORDS = frozenset(
    "of to in it is be as at so we he by or on do if me my up an go no us am ox ah oh ok hi id ma pa ex vs tv uk "
    "ad da de di du la le el al km kg cm mm ml lb oz ft mi".split()
)
# What a whole word may gain in the source without the phrase's form being a cut ('year' of 'years').
_INFLECTIONS = frozenset({"s", "es", "d", "ed", "ing", "'s", "’s", "er", "ers", "ly", "n", "en"})


def normalise_heading(heading: str) -> str:
    return " ".join(str(heading).lower().split())
