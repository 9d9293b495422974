"""Does a context support a statement? A model-free verdict built from a few generalising signals.

The offline judge has no LLM, so support is decided from surface evidence. Word overlap alone is easy
to fool: a hallucinated answer usually reuses the context's words and changes one thing in it (a
number, a name, a negation, who did what). Each signal below looks for one such change:

- numbers: a number or number word in the statement that no context contains;
- entities: a capitalised name in the statement that no context contains;
- novel words: the words the statement adds beyond the question must all be grounded;
- coverage: rarity-weighted share of the statement's content words found in the best context;
- negation: the statement and the context passage that matches it disagree on negation;
- relation: no one sentence (or one continued by a pronoun) states most of it: words stitched together;
- polar answers: a bare "yes"/"no" can only be checked for the context covering the question.

The first hard signal that fails decides the verdict and names itself in `note`; `score` is a graded
confidence in [0, 1], >= 0.5 exactly when `supported`. Deterministic, no I/O, pure Python.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from rag_eval_pipeline.core.text import STOPWORDS, content_words

SIGNALS = ("numbers", "entities", "novel_words", "coverage", "negation", "relation", "polar")
# Signals that point at a changed fact (a number, a name, a negation), not merely at other words: a statement
# failing one of them is evidence of a hallucination even when it is worded unlike the context.
FACT_SIGNALS = frozenset({"numbers", "entities", "negation"})

COVERAGE_THRESHOLD = 0.75  # rarity-weighted share of content words the best context must contain
_NEGATION_SCOPE = 4  # words after "not" that it governs

ANAPHORS = frozenset("he she it they his her its their this these those".split())

_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,][0-9]+)*")
_GLUED_SENTENCE = re.compile(r"(?<=[a-z0-9\)\]\"'])\.(?=[A-Z\"'(])")  # "...film.The next" -> two sentences
_SENTENCE_END = re.compile(r"(?<=[.!?;])[\"')\]]*\s+")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")
_NEGATION_WORDS = frozenset("not no never none nobody nothing neither nor cannot without".split())
_POLAR = re.compile(r"^\s*(yes|no)\s*[.!]?\s*$", re.I)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
        " sixteen seventeen eighteen nineteen twenty".split()
    )
    if i
}
_NUMBER_WORDS.update(
    {
        "first": "1",
        "second": "2",
        "third": "3",
        "fourth": "4",
        "fifth": "5",
        "sixth": "6",
        "seventh": "7",
        "eighth": "8",
        "ninth": "9",
        "tenth": "10",
    }
)
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")


@dataclass(frozen=True)
class SupportAssessment:
    """The verdict on one statement, a graded confidence, the best context and the deciding signal."""

    supported: bool
    score: float
    context_index: int | None
    note: str
    signal: str = ""  # the signal that failed the statement (see SIGNALS); "" when supported


@dataclass(frozen=True)
class _Token:
    surface: str  # as written, accents folded
    stem: str  # lowercased, stemmed content word; "" for stopwords
    sentence: int  # index of the sentence it belongs to


def assess_support(
    statement: str, contexts: list[str], question: str = "", *, disabled: frozenset[str] = frozenset()
) -> SupportAssessment:
    """Whether `contexts` support `statement`; `question` (when known) lets a short answer be read in full.

    `disabled` switches signals off by name (see SIGNALS); it exists for ablation measurements.
    """
    texts = [c for c in contexts if c and c.strip()]
    if not texts:
        return SupportAssessment(False, 0.0, None, "no context")
    parsed = [_tokenize(c) for c in contexts]
    if "polar" not in disabled and _POLAR.match(statement):
        return _polar_answer(statement, question, parsed)
    claim = _tokenize(statement)
    words = _stems(claim)
    if not words:
        return SupportAssessment(True, 0.5, None, "nothing to check: no content words")
    all_words = set().union(*(_stems(p) for p in parsed))
    weights = _rarity_weights(words, parsed)
    coverages = [_weighted_coverage(words, _stems(p), weights) for p in parsed]
    best = max(range(len(parsed)), key=lambda i: (coverages[i], -i))
    coverage = coverages[best]
    local = _local_coverage(words, parsed[best], weights)

    failure = None
    for name, check in (
        ("numbers", lambda: _missing_numbers(claim, parsed)),
        ("entities", lambda: _missing_entities(claim, all_words)),
        ("novel_words", lambda: _missing_novel_words(words, question, all_words)),
        ("coverage", lambda: _low_coverage(coverage)),
        ("negation", lambda: _negation_mismatch(claim, contexts[best], parsed[best])),
        ("relation", lambda: _scattered(local)),
    ):
        if name not in disabled and (failure := check()):
            break
    if failure:
        return SupportAssessment(False, round(0.45 * coverage, 4), best, failure, name)
    evidence = coverage if "relation" in disabled else local
    score = 0.5 + 0.5 * (evidence - COVERAGE_THRESHOLD) / (1 - COVERAGE_THRESHOLD)
    return SupportAssessment(True, round(min(1.0, max(0.5, score)), 4), best, f"covered {coverage:.2f}")


# --- signals: each returns a note when the statement fails it, else None ----------------------------


def _missing_numbers(claim: list[_Token], parsed: list[list[_Token]]) -> str | None:
    # A changed count, year or date is the cheapest hallucination and word overlap cannot see it.
    context_numbers = set().union(*(_numbers(p) for p in parsed))
    missing = _numbers(claim) - context_numbers
    return f"numbers not in context: {sorted(missing)}" if missing else None


def _missing_entities(claim: list[_Token], context_words: set[str]) -> str | None:
    # A swapped name keeps the sentence's shape and most of its words; the name itself is then absent.
    for name in _entities(claim):
        if any(part not in context_words for part in name[1]):
            return f"entity not in context: '{name[0]}'"
    return None


def _missing_novel_words(words: list[str], question: str, context_words: set[str]) -> str | None:
    # What the answer adds beyond the question is its claim; echoing the question proves nothing.
    if not question:
        return None
    asked = set(_stems(_tokenize(question)))
    novel = [w for w in dict.fromkeys(words) if w not in asked]
    missing = [w for w in novel if w not in context_words]
    return f"new words not in context: {missing}" if missing else None


def _low_coverage(coverage: float) -> str | None:
    # Most of what a supported statement says can be found in one passage, rare words above all.
    return f"coverage {coverage:.2f} below {COVERAGE_THRESHOLD}" if coverage < COVERAGE_THRESHOLD else None


def _negation_mismatch(claim: list[_Token], context: str, parsed: list[_Token]) -> str | None:
    # Adding or dropping "not" flips the meaning while keeping every content word in place.
    words = _stems(claim)
    passage = _tokenize(_best_passage(words, parsed, _sentences(context)))
    if _negations(claim, context) and not _negations(passage):
        return "negation not in the context"
    if not _negations(claim) and _negation_governs(words, passage):
        return "the context negates this"
    return None


def _negations(tokens: list[_Token], context: str = "") -> list[int]:
    """Positions of negation cues. A capitalised cue inside a sentence is a name ("Never Shout Never"), and
    so is one opening a run of capitalised words that the context contains as written."""
    found = []
    for i, t in enumerate(tokens):
        low = t.surface.lower()
        cue = low in _NEGATION_WORDS or (low == "t" and i > 0 and tokens[i - 1].surface.lower().endswith("n"))
        opens_sentence = i == 0 or tokens[i - 1].sentence != t.sentence
        if not cue or not (t.surface.islower() or opens_sentence):
            continue
        name = "" if t.surface.islower() else _capitalised_run(tokens, i)
        if name and name in _fold(context):
            continue
        found.append(i)
    return found


def _capitalised_run(tokens: list[_Token], start: int) -> str:
    """The words from `start` on while they stay capitalised and in one sentence; "" for a lone word."""
    end = start + 1
    while end < len(tokens) and tokens[end].surface[:1].isupper() and tokens[end].sentence == tokens[start].sentence:
        end += 1
    return " ".join(t.surface for t in tokens[start:end]) if end - start > 1 else "\0"


def _negation_governs(words: list[str], passage: list[_Token]) -> bool:
    """A negation in the context matters only when it governs one of the statement's own words."""
    wanted = set(words)
    return any(any(u.stem in wanted for u in passage[i + 1 : i + 1 + _NEGATION_SCOPE]) for i in _negations(passage))


def _scattered(local: float) -> str | None:
    # A relation the context states sits in one sentence (or one continued by a pronoun); a claim whose
    # words are only found scattered over unrelated sentences was stitched together, not read.
    if local < COVERAGE_THRESHOLD:
        return f"claim not stated in one place: best sentence covers {local:.2f}"
    return None


def _polar_answer(statement: str, question: str, parsed: list[list[_Token]]) -> SupportAssessment:
    # A bare yes/no restates the question; lexically we can only check that the context covers it.
    asked_tokens = _tokenize(question)
    asked = _stems(asked_tokens)
    if not asked:
        return SupportAssessment(False, 0.0, None, "bare yes/no without a question to check", "polar")
    context_words = set().union(*(_stems(p) for p in parsed))
    names = _entities(asked_tokens)
    # the question's names are given, not claimed: a name counts as present when most of it is
    missing = [name for name, parts in names if sum(p in context_words for p in parts) * 2 < len(parts)]
    if names and missing:
        return SupportAssessment(
            False, 0.2, None, f"bare yes/no about '{missing[0]}', absent from the context", "polar"
        )
    coverages = [len(set(asked) & set(_stems(p))) / len(set(asked)) for p in parsed]
    best = max(range(len(parsed)), key=lambda i: (coverages[i], -i))
    coverage = coverages[best]
    supported = bool(names) or coverage >= COVERAGE_THRESHOLD  # every name the question asks about is there
    score = 0.5 + 0.5 * coverage if supported else 0.45 * coverage
    note = f"bare '{statement.strip().lower().rstrip('.!')}': context covers {coverage:.2f} of the question (polarity unchecked)"
    return SupportAssessment(supported, round(score, 4), best, note, "" if supported else "polar")


# --- graded evidence ----------------------------------------------------------------------------------


def _rarity_weights(words: list[str], parsed: list[list[_Token]]) -> dict[str, float]:
    """IDF over the contexts' own sentences: a word found in every sentence says less than a rare one."""
    sentences = [{t.stem for t in p if t.stem and t.sentence == s} for p in parsed for s in {t.sentence for t in p}]
    n = len(sentences)
    return {w: math.log((n + 1) / (1 + sum(w in s for s in sentences))) + 1.0 for w in set(words)}


def _weighted_coverage(words: list[str], context_words: list[str], weights: dict[str, float]) -> float:
    present = set(context_words)
    unique = set(words)
    total = sum(weights[w] for w in unique)
    return sum(weights[w] for w in unique if w in present) / total if total else 0.0


def _local_coverage(words: list[str], parsed: list[_Token], weights: dict[str, float]) -> float:
    """Best rarity-weighted coverage by one sentence, or by a sentence plus the next one when that opens
    with a pronoun ("He was ...") and so continues the same subject."""
    by_sentence: dict[int, set[str]] = {}
    opens_with_pronoun: dict[int, bool] = {}
    for t in parsed:
        opens_with_pronoun.setdefault(t.sentence, t.surface.lower() in ANAPHORS)
        if t.stem:
            by_sentence.setdefault(t.sentence, set()).add(t.stem)
    best = 0.0
    for index, sentence_words in by_sentence.items():
        window = sentence_words | (by_sentence.get(index + 1, set()) if opens_with_pronoun.get(index + 1) else set())
        best = max(best, _weighted_coverage(words, list(window), weights))
    return best


def _best_passage(words: list[str], parsed: list[_Token], sentences: list[str]) -> str:
    """The context sentence sharing most content words with the statement (ties: the earliest)."""
    if not sentences:
        return ""
    wanted = set(words)
    overlap = [0] * len(sentences)
    seen: set[tuple[int, str]] = set()
    for t in parsed:
        if t.stem in wanted and (t.sentence, t.stem) not in seen and t.sentence < len(sentences):
            seen.add((t.sentence, t.stem))
            overlap[t.sentence] += 1
    return sentences[max(range(len(sentences)), key=lambda i: (overlap[i], -i))]


# --- tokenising ---------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Accents folded, glued sentences split, possessives dropped, typographic quotes made plain."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = _POSSESSIVE.sub("", text)
    return _GLUED_SENTENCE.sub(". ", text)


def _sentences(text: str) -> list[str]:
    text = re.sub(r"\s+", " ", _fold(text)).strip()
    return [s for s in _SENTENCE_END.split(text) if s.strip()] if text else []


@lru_cache(maxsize=4096)
def _tokenize_cached(text: str) -> tuple[_Token, ...]:
    out: list[_Token] = []
    for index, sentence in enumerate(_sentences(text)):
        for surface in _WORD.findall(sentence):
            out.append(_Token(surface, _stem(surface), index))
    return tuple(out)


def _tokenize(text: str) -> list[_Token]:
    return list(_tokenize_cached(text or ""))


@lru_cache(maxsize=65536)
def _stem(surface: str) -> str:
    """The content word a token stands for; number words and ordinals become digits ("twelve" -> "12")."""
    low = surface.lower()
    if low in _NUMBER_WORDS:
        return _NUMBER_WORDS[low]
    if (ordinal := _ORDINAL.match(low)) is not None:
        return ordinal.group(1)
    stems = content_words(surface)
    return stems[0] if len(stems) == 1 else ""


def _stems(tokens: list[_Token]) -> list[str]:
    return [t.stem for t in tokens if t.stem]


def _numbers(tokens: list[_Token]) -> set[str]:
    return {t.stem.replace(",", "") for t in tokens if t.stem[:1].isdigit()}


def _entities(claim: list[_Token]) -> list[tuple[str, list[str]]]:
    """Runs of capitalised words; a lone capitalised word that opens a sentence is not taken for a name."""
    names: list[tuple[str, list[str]]] = []
    run: list[int] = []

    def flush() -> None:
        opens_sentence = run[0] == 0 or claim[run[0] - 1].sentence != claim[run[0]].sentence
        stems = [claim[i].stem for i in run if claim[i].stem]
        if stems and not (opens_sentence and len(run) == 1):
            names.append((" ".join(claim[i].surface for i in run), stems))

    for i, t in enumerate(claim):
        capitalised = t.surface[:1].isupper() and t.surface.lower() not in STOPWORDS
        if capitalised and run and run[-1] == i - 1 and claim[i - 1].sentence == t.sentence:
            run.append(i)
            continue
        if run:
            flush()
        run = [i] if capitalised else []
    if run:
        flush()
    return names
