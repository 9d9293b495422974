"""Small text utilities shared by chunking, synthesis and the offline judge."""

from __future__ import annotations

import hashlib
import re

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NONCOMMITTAL = re.compile(
    r"\b(i (do not|don't) know|cannot (be )?answer|can't answer|not (\w+ ){0,2}enough information|no information"
    r"|unable to (answer|find|determine)|not (mentioned|stated|specified) in the)\b",
    re.I,
)

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto over under as is are was
    were be been being it its this that these those there here which who whom whose what when where why how
    do does did done has have had having not no nor so than too very can could may might must shall should
    will would about above after again against all any both each few more most other some such only own same
    just also i me my we our you your he him his she her they them their per via within without up down out
    off once""".split()
)


def tokens(text: str) -> list[str]:
    """Chunking tokens: words and punctuation marks (a model-free stand-in for subword tokens)."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(tokens(text))


def split_sentences(text: str) -> list[str]:
    text = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()] if text else []


def content_words(text: str) -> list[str]:
    """Lowercased words without stopwords, lightly stemmed so 'policies'/'policy' meet."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stem(word: str) -> str:
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word[-len(suffix) - 1].isdigit():
            return word[: -len(suffix)] + replacement
    return word


def is_noncommittal(text: str) -> bool:
    """'I don't know', 'not enough information': a refusal to answer, not a claim."""
    return bool(_NONCOMMITTAL.search(text.replace("\u2019", "'")))  # models often write a typographic apostrophe
