"""Unanswerable questions that make sense: a topic the corpus itself names, and a kind of fact that fits it.

A budget fits a programme, not a poem; a population fits a town, not a method. Topics are noun phrases
of the chunk's own sentences whose head noun names a kind of thing we know the facts of (an organisation,
a programme, a method or system, a settlement, a building, a written work); each kind has its own
frames. The generator then keeps only a frame whose fact no chunk mentioning the topic states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_eval_pipeline.core.text import STOPWORDS
from rag_eval_pipeline.synthesis.phrases import CLAUSE_STARTS, DANGLING_ENDS, PRONOUNS, QUANTIFIERS, phrase_problem


@dataclass(frozen=True)
class Frame:
    question: str  # with {topic}
    answer_words: tuple[str, ...]  # words that would state the fact: a chunk holding one may answer it


# Head nouns (singular and plural) of each kind of thing.
_KIND_NOUNS = {
    "organisation": "council department company agency office committee team school university college hospital "
    "clinic association government board ministry authority organisation organization institute "
    "society club firm business charity union library museum newspaper publisher army navy",
    "programme": "programme program project scheme service policy plan initiative campaign strategy fund grant "
    "course curriculum competition festival",
    "method": "method process procedure system technique tool software application technology standard "
    "framework device machine instrument engine vehicle weapon",
    "settlement": "town city village country county district region province state suburb borough",
    "building": "station airport building house church chapel cathedral bridge inn hotel factory mill observatory "
    "laboratory prison castle tower theatre theater",
    "landmark": "hill common heath river lake park wood forest garden meadow beach island",
    "route": "road street lane avenue canal railway motorway highway",
    # Not "article" or "letter": in a grammar text they are parts of speech and of the alphabet.
    "work": "book report poem novel story manual handbook magazine journal essay textbook",
}
_FRAMES = {
    "organisation": (
        Frame("How many people did {topic} employ last year?", ("employ", "employees", "staff")),
        Frame("What was the annual budget of {topic} last year?", ("budget",)),
        Frame("In which year was {topic} founded?", ("founded", "established")),
        Frame("Who was the first director of {topic}?", ("director", "first")),
    ),
    "programme": (
        Frame("What was the total budget spent on {topic} last year?", ("budget", "spent")),
        Frame("In which year was {topic} first introduced?", ("introduced",)),
        Frame("How many complaints about {topic} were received in the last quarter?", ("complaint", "complaints")),
        Frame("Who is the contact person responsible for {topic}?", ("contact", "responsible")),
    ),
    "method": (
        Frame("In which year was {topic} first introduced?", ("introduced", "invented")),
        Frame("How much did {topic} cost to put in place?", ("cost", "price")),
        Frame("Which company supplied {topic}?", ("company", "supplied", "supplier")),
    ),
    "settlement": (
        Frame("How many people lived in {topic} at the last census?", ("census", "population", "inhabitants")),
        Frame("What is the total area of {topic} in square kilometres?", ("area", "square")),
        Frame("Who was the mayor of {topic} in 2020?", ("mayor",)),
    ),
    "building": (
        Frame("In which year was {topic} built?", ("built", "constructed")),
        Frame("Who was the architect of {topic}?", ("architect", "designed")),
        Frame("How many visitors did {topic} have last year?", ("visitors",)),
    ),
    "landmark": (
        Frame("How many hectares does {topic} cover?", ("hectares", "acres", "area")),
        Frame("Who owns {topic} today?", ("owns", "owner", "owned")),
        Frame("How many visitors did {topic} have last year?", ("visitors",)),
    ),
    "route": (
        Frame("In which year was {topic} built?", ("built", "constructed", "opened")),
        Frame("How long is {topic} in kilometres?", ("long", "length", "kilometres", "miles")),
    ),
    "work": (
        Frame("How many copies of {topic} were printed in its first edition?", ("copies", "edition", "printed")),
        Frame("Into how many languages has {topic} been translated?", ("translated", "languages")),
        Frame("Who was the editor of the first edition of {topic}?", ("editor", "edition")),
    ),
}
_KIND_OF = {noun: kind for kind, nouns in _KIND_NOUNS.items() for noun in nouns.split()}
_WORD = re.compile(r"[A-Za-z][\w'’-]*|&")  # "&" kept: "Procter & Gamble" is one name
# Modifiers that leave a reader asking "which one?": "the specific department", "the first letter".
_VAGUE_MODIFIERS = frozenset(
    "specific first second third last next other same certain particular following previous whole entire main "
    "general various different own new old good bad big small great little whole typical usual favorite "
    "favourite single individual long short high low large huge tiny wide narrow important simple easy hard "
    "difficult possible real actual current recent early late former latter major minor only".split()
)
# Words that read as a noun's modifier rather than a verb or an adverb.
_NOT_MODIFIER = STOPWORDS | PRONOUNS | QUANTIFIERS | CLAUSE_STARTS | DANGLING_ENDS | _VAGUE_MODIFIERS


def kind_of(phrase: str) -> str | None:
    """The kind of thing a noun phrase names, by its last word (its head): 'the town council' -> organisation."""
    words = phrase.split()
    return _kind_of_word(words[-1]) if words else None


def frames_for(phrase: str) -> tuple[Frame, ...]:
    kind = kind_of(phrase)
    return _FRAMES[kind] if kind else ()


def topic_phrases(sentence: str) -> list[str]:
    """Names in a sentence whose last word says what kind of thing they name.

    'Trains to Chobham Road were cancelled.' -> ['Chobham Road']. Common nouns are left out, with or
    without modifiers: asked on its own, "the town council" leaves a reader asking which one.
    """
    words = _WORD.findall(sentence)
    phrases = []
    for i, word in enumerate(words):
        if word.lower() not in _KIND_OF:  # a singular head only: the frames ask about one thing
            continue
        following = words[i + 1 : i + 3]
        if following and (_kind_of_word(following[0]) or (word[:1].isupper() and following[0][:1].isupper())):
            continue  # a modifier of the next noun ('school board'), or a name going on ('Hill Road')
        if len(following) == 2 and following[0] in ("of", "for", "and") and following[1][:1].isupper():
            continue  # "the London School of Economics": the name goes on after the head
        modifiers = _modifiers(words, i)
        start = i - len(modifiers)
        # Only a name identifies the thing to someone who has not read the passage: "Chobham Road", not
        # "the train service" (which one?). The first word of a sentence is capitalised anyway.
        if (
            not modifiers
            or start == 0
            or not all(m[:1].isupper() for m in modifiers)
            or modifiers[-1].endswith(("ward", "wards", "ses"))
        ):  # a direction ("Londonward"), a possessive ("Joneses house")
            continue
        phrase = " ".join(modifiers + [word])
        if (
            words[start - 1].lower() == "the"
        ):  # a name takes "the" where the text gives it ("the Natural History Museum")
            phrase = f"the {phrase}"
        if phrase_problem(phrase, sentence) is None:
            phrases.append(phrase)
    return phrases


def _modifiers(words: list[str], head: int) -> list[str]:
    """Up to two words before the head that read as modifiers (lowercase content words), or up to three
    capitalised ones of a name ('New York Times newspaper'); none when a longer name would be cut
    ('York City' of 'New York City')."""
    taken: list[str] = []
    limit = 3 if head and words[head - 1][:1].isupper() else 2
    for word in reversed(words[max(0, head - limit) : head]):
        if taken and word[:1].isupper() != taken[0][:1].isupper():
            break  # a name and a common word do not make one modifier
        lower = word.lower()
        # Inside a name, "New" or "Great" is part of it, not a vague adjective.
        refused = (_NOT_MODIFIER - _VAGUE_MODIFIERS) if word[:1].isupper() else _NOT_MODIFIER
        verb_like = word[:1].islower() and lower.endswith(("ly", "ed", "ing"))  # "Woking" is a name
        if lower in refused or verb_like or not word.isalpha():
            break
        taken.insert(0, word)
    start = head - len(taken)
    if taken and taken[0][:1].isupper() and _name_goes_on(words, start):
        return []  # "York City" of "New York City", "England Museum" of "Bank of England Museum"
    return taken


def _name_goes_on(words: list[str], start: int) -> bool:
    """Whether the name ending at the head starts before `start`: a capitalised word, or one joined by
    "of", "and" or "&" to a capitalised word ("Port of London Authority")."""
    before = words[start - 1] if start >= 1 else ""
    if start > 1 and before[:1].isupper() and before.lower() not in STOPWORDS:
        return True
    # words[0] is capitalised as the sentence's first word, not as a name: "Pupils of Edmonds College".
    return start > 2 and before.lower() in ("of", "and", "&", "for", "de", "du") and words[start - 2][:1].isupper()


def _kind_of_word(word: str) -> str | None:
    lower = word.lower()
    for singular in (
        lower,
        lower[:-1] if lower.endswith("s") else None,
        lower[:-3] + "y" if lower.endswith("ies") else None,
    ):
        if singular and singular in _KIND_OF:
            return _KIND_OF[singular]
    return None
