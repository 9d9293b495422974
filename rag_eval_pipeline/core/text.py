"""Small text utilities shared by chunking, synthesis and the offline judge."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from rag_eval_pipeline.core.defaults import MAX_FIELD_CHARS

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


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def scorable_text(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD, so it can be hashed, embedded and written as UTF-8.

    JSON may escape half of a UTF-16 pair with no other half ("\\ud800"), and json.loads accepts it, but
    nothing that encodes UTF-8 does: one such character would stop a whole run. A whole pair left as
    two code points becomes its one character.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def field_text(text: str, what: str) -> str:
    """One text field of an item to score (question, answer, context, ground truth): scorable, and at most
    MAX_FIELD_CHARS long, else ValueError with its size; scoring cost grows with the product of the fields."""
    if len(text) > MAX_FIELD_CHARS:
        raise ValueError(f"{what} is {len(text):,} characters, over the limit of {MAX_FIELD_CHARS:,} per field")
    return scorable_text(text)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stem(word: str) -> str:
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word[-len(suffix) - 1].isdigit():
            return word[: -len(suffix)] + replacement
    return word


def word_count(text: str) -> int:
    """Words as a reader counts them: whitespace-separated tokens holding a letter or digit (not " . ")."""
    return sum(1 for token in text.split() if any(ch.isalnum() for ch in token))


def anchored_share(text: str, contexts: list[str]) -> float:
    """Share of the text's distinct content words found in the contexts; 1.0 for a text without any.

    A low share means the text says what it says in other words than the contexts: a paraphrase or a
    hallucination, which word-level signals cannot tell apart.
    """
    words = set(content_words(text))
    if not words:
        return 1.0
    return len(words & set(content_words(" ".join(contexts)))) / len(words)


# Frequent function words of German, French, Spanish, Italian, Portuguese and Dutch that are not English
# words: a few of them in a sentence with fewer English ones is the cheapest sign of another language.
_FOREIGN_FUNCTION_WORDS = frozenset(
    """der die das und ist nicht nie ein eine einen dem den des sich auf für mit von zu im wird werden auch
    wie wann bei nach aus oder wenn nur noch kann sind wurde zum zur vom über ihr ihre ihren
    le la les de et est un une des du en pour dans que qui pas sur au aux avec ce cette il elle ils sont
    par plus ne où été leur jamais
    el los las y es una por con para del se su al lo como más pero fue está son sus entre cuando muy sin
    nunca gli della delle dalla nella alla nel che non sono anche questo è di
    os um uma não com da em na nos foi são
    het een van niet dat op te zijn met voor wordt naar bij ook""".split()
)
_LETTERS = re.compile(r"[^\W\d_]+")  # words of any alphabet, accents kept ("für", "où")
_MIN_WORDS_FOR_LANGUAGE = 3  # a name or a number alone is in no language; do not guess on them


def looks_non_english(text: str) -> bool:
    """True when the text is plainly not English: mostly letters of another script (Cyrillic, CJK, Arabic...),
    or three words or more with another language's function words (in lowercase, not inside a name) that,
    with its accented words and its inverted marks (¿ ¡), outnumber the English function words.

    A heuristic, tuned to miss rather than to flag: a name or a number alone is taken for English, and so is
    an English sentence with a name or a loanword in it ("the café in Zürich").
    """
    letters = [ch for ch in text if ch.isalpha()]
    other_script = sum(1 for ch in letters if not _latin(ch))
    if other_script >= 2 and other_script * 2 > len(letters):
        return True
    words = _LETTERS.findall(text)
    if len(words) < _MIN_WORDS_FOR_LANGUAGE:
        return False
    function = sum(1 for i, w in enumerate(words) if w in _FOREIGN_FUNCTION_WORDS and not _in_name(words, i))
    accented = sum(1 for w in words if not w.isascii()) + ("¿" in text or "¡" in text)
    english = sum(1 for w in words if w.lower() in STOPWORDS)
    return function >= 1 and function + accented >= 2 and function + accented > english


_NAME_PARTICLES = frozenset("de du da di del dos der den des la le van von".split())


def _in_name(words: list[str], i: int) -> bool:
    """A particle between two capitalised words belongs to a name: "Marquis de Lafayette", "Ludwig van
    Beethoven". (Capitalised function words are not counted at all: "Los Angeles", "Le Monde".)"""
    return (
        words[i] in _NAME_PARTICLES
        and 0 < i < len(words) - 1
        and words[i - 1][:1].isupper()
        and words[i + 1][:1].isupper()
    )


def _latin(ch: str) -> bool:
    return ch.isascii() or unicodedata.name(ch, "").startswith("LATIN")


def is_noncommittal(text: str) -> bool:
    """'I don't know', 'not enough information': a refusal to answer, not a claim."""
    return bool(_NONCOMMITTAL.search(text.replace("\u2019", "'")))  # models often write a typographic apostrophe


# --- table-like text ------------------------------------------------------------------------------
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?"
# A calendar date written out: "12 March 2021", "March 12, 2021", "August 2015", "Mon, 3 May 2021",
# "2021-03-12", "12/03/2021", "12.03.2021". A date is one fact, not a row of numbers.
DATE_EXPRESSION = re.compile(
    rf"(?<![\w.-])(?:{_WEEKDAY}\s*)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+\d{{4}}"
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|{_MONTH},?\s+\d{{4}}"
    r"|\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4})(?![\w-])",
    re.I,
)
# A date without a day: a year, a range of years, a quarter, a month alone.
_DATE_WITHOUT_DAY = re.compile(rf"(?:19|20)\d\d(?:\s*[-/\u2013]\s*(?:19|20)?\d\d)?|q[1-4]\s+\d{{4}}|{_MONTH}", re.I)


def is_date(text: str) -> bool:
    """'August 2015', '12 March 2021', '2021-03-12', 'Q3 2020', '1998': a date standing alone."""
    text = " ".join(str(text).strip(" .,;:").split())
    return bool(DATE_EXPRESSION.fullmatch(text) or _DATE_WITHOUT_DAY.fullmatch(text))


# A cell holding a number: "5", "1,234", "8.9", "56%", "(12)", "-3.5", "$40", "2019/20".
_NUMERIC_CELL = re.compile(r"[(\[]?[-+\u2212]?[$€£¥]?\d[\d.,:/\u2013-]*%?[)\]]?[.,;:]?")
# A number standing alone, not closing a clause: "2015," in "In 2015, 13 projects" is not bare.
_BARE_NUMBER = re.compile(r"[(\[]?[-+\u2212]?[$€£¥]?\d[\d.,:/\u2013-]*(?<![.,:])%?[)\]]?")


def is_table_like(text: str) -> bool:
    """True for a line or sentence made mostly of numbers and short cells, as a table row reads.

    "Manufacturing 5 , 300 13 .", "2019 2020 2021" and "Total 1,234 56 % 78" are table-like; "The council
    spent 5,300 euros on 13 projects in 2015." is not. Prose, even dense with figures, joins its numbers
    with words ("on", "in", "and"), so a number-heavy text counts as a table only when its numbers stand
    side by side or no function word links them. It errs towards prose: a missed row is harmless.
    """
    cells = DATE_EXPRESSION.sub("date", text).split()
    words = [cell for cell in cells if any(ch.isalpha() for ch in cell) and not _NUMERIC_CELL.fullmatch(cell)]
    numbers = [cell for cell in cells if _NUMERIC_CELL.fullmatch(cell)]
    if len(numbers) < 2:
        return False
    numeric_share = len(numbers) / (len(numbers) + len(words))
    side_by_side = _longest_run_of_bare_numbers(cells) >= 2
    function_words = sum(1 for word in words if word.lower().strip(".,;:!?()\"'") in STOPWORDS)
    if numeric_share >= 0.5:
        return side_by_side or function_words == 0
    if side_by_side and len(numbers) >= 3:
        return numeric_share >= 0.3 and function_words <= 1
    return side_by_side and function_words == 0 and numeric_share >= 0.25


def _longest_run_of_bare_numbers(cells: list[str]) -> int:
    """Numbers next to each other; detached punctuation (" , ", " .") between them does not break a run."""
    longest = run = 0
    for cell in cells:
        if _BARE_NUMBER.fullmatch(cell):
            run += 1
            longest = max(longest, run)
        elif any(ch.isalnum() for ch in cell):
            run = 0
    return longest
