"""Page furniture: running headers and footers, page numbers and watermarks at the edges of PDF pages.

Pure: page texts in, cleaned page texts and the removed lines out. Furniture is found only among the
first and last few non-empty lines of a page (the edge zone); a line of the page body is never removed,
whatever it repeats. A line is furniture when

- its normalised form (lowercase, whitespace collapsed, digit runs as '#') stands in the edge zone of
  enough pages and hardly ever in the body, and either its text is the same on those pages (a running
  title, a watermark, an issue date) or its number follows the page number ("Closed syllable word
  lists 7", "Page 3/7"); chapter headings "Chapter 1", "Chapter 2" share a form but not that sequence;
- or it is a page number ("12", "Page 3 of 10", "- 4 -", "iv") whose value minus the page's position is
  the same on enough pages.

A line that starts or ends with a long furniture text ("SCIENCE, VOL. 162 on March 12, 2021 ...
Downloaded from") loses that part and keeps the rest. Everything is conservative: a header kept costs
little, a line of real text lost costs an answer. A document needs at least three pages for repetition
to mean anything; shorter ones are returned unchanged.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass

from rag_eval_pipeline.core.text import is_date

MIN_DOCUMENT_PAGES = 3
EDGE_LINES = 4  # non-empty lines at the top and at the bottom of a page that may be furniture
MIN_PAGES = 3  # furniture repeats on at least this many pages...
MIN_PAGE_SHARE = 0.05  # ...and on at least this share of a long document's pages (a watermark on 1 page in 12)
SHORT_LINE_PAGE_SHARE = 0.5  # a one-word line ("License") must repeat on half the pages: words lists repeat too
MIN_SEQUENCE_SHARE = 0.8  # a numbered header follows the pages on nearly every page it stands on
MAX_BODY_SHARE = 0.1  # a text also seen in the body of more than a tenth as many pages is prose, not furniture
MIN_MERGED_CHARS = 20  # a furniture text this long is cut from a line it was merged into

_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER_LINES = (  # the number is the first group
    re.compile(r"(\d{1,5})"),
    re.compile(r"(?:page|p\.|pg\.?)\s*(\d{1,5})(?:\s*(?:of|/)\s*\d{1,5})?", re.I),
    re.compile(r"(\d{1,5})\s*(?:of|/)\s*\d{1,5}", re.I),
    re.compile(r"[-\u2013\u2014]\s*(\d{1,5})\s*[-\u2013\u2014]"),
)
_ROMAN_PAGE_NUMBER = re.compile(r"(?:[-\u2013\u2014]\s*)?([ivxlc]{1,7})(?:\s*[-\u2013\u2014])?")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}


@dataclass(frozen=True)
class RemovedLine:
    page: int  # 1-based
    text: str
    kind: str  # "header", "footer" or "page_number"


@dataclass(frozen=True)
class CleanedPages:
    pages: list[str]
    removed: list[RemovedLine]


@dataclass(frozen=True)
class _EdgeLine:
    page: int  # 0-based
    index: int  # line index in page.splitlines()
    text: str  # control characters removed, whitespace collapsed
    kind: str  # "header" or "footer"

    @property
    def form(self) -> str:
        return _DIGITS.sub("#", self.text.lower())


def strip_furniture(pages: list[str]) -> CleanedPages:
    """The pages without their running headers, footers and page numbers, and what was taken out."""
    if len(pages) < MIN_DOCUMENT_PAGES:
        return CleanedPages(list(pages), [])
    lines = [page.splitlines() for page in pages]
    edges = [_edge_lines(page_number, page_lines) for page_number, page_lines in enumerate(lines)]
    needed = max(MIN_PAGES, math.ceil(MIN_PAGE_SHARE * len(pages)))
    repeated = _repeated_lines(edges, _body_forms(lines, edges), needed, len(pages))
    edits: dict[tuple[int, int], str] = {}  # (page, line index) -> what stays of the line ("" when it all goes)
    removed: list[tuple[int, int, RemovedLine]] = []
    for edge in repeated:
        edits[(edge.page, edge.index)] = ""
        removed.append((edge.page, edge.index, _removed(edge, edge.text)))
    for edge, kept, cut in _merged_lines(edges, edits, repeated):
        edits[(edge.page, edge.index)] = kept
        removed.append((edge.page, edge.index, _removed(edge, cut)))
    for edge in _page_numbers(edges, edits, needed):
        edits[(edge.page, edge.index)] = ""
        removed.append((edge.page, edge.index, RemovedLine(edge.page + 1, edge.text, "page_number")))
    removed.sort(key=lambda item: (item[0], item[1]))
    return CleanedPages(_apply(pages, lines, edits), [line for _, _, line in removed])


def is_furniture_text(line: str) -> bool:
    """A page number or a date standing alone: the kind of line that is never a section title."""
    text = _clean(line)
    return bool(text) and (_page_number_of(text) is not None or is_date(text))


# --- the edge zone ----------------------------------------------------------------------------------


def _clean(line: str) -> str:
    without_controls = "".join(ch for ch in line if unicodedata.category(ch) != "Cc" or ch.isspace())
    return " ".join(without_controls.split())


def _edge_lines(page: int, page_lines: list[str]) -> list[_EdgeLine]:
    filled = [index for index, line in enumerate(page_lines) if _clean(line)]
    # A short page (a slide, a worksheet) keeps a body of its own: otherwise every line would be an edge line.
    depth = min(EDGE_LINES, max(1 if len(filled) < 5 else 2, len(filled) // 3))
    top, bottom = filled[:depth], filled[-depth:]
    # A page number is never prose: on a short page it may still stand second from an edge.
    numbers = {i for i in filled[:2] + filled[-2:] if _page_number_of(_clean(page_lines[i])) is not None}
    edges = []
    for rank, index in enumerate(filled):
        if index in top or index in bottom or index in numbers:
            # On a short page both zones overlap: a line belongs to the edge it is nearer.
            kind = "header" if rank < len(filled) - 1 - rank else "footer"
            edges.append(_EdgeLine(page, index, _clean(page_lines[index]), kind))
    return edges


def _body_forms(lines: list[list[str]], edges: list[list[_EdgeLine]]) -> Counter:
    """How many pages show each normalised line outside their edge zone."""
    counts: Counter = Counter()
    for page_lines, page_edges in zip(lines, edges):
        edge_indexes = {edge.index for edge in page_edges}
        forms = {_DIGITS.sub("#", _clean(line).lower()) for i, line in enumerate(page_lines) if i not in edge_indexes}
        counts.update(form for form in forms if form)
    return counts


# --- repeated headers and footers -------------------------------------------------------------------


def _repeated_lines(edges: list[list[_EdgeLine]], body: Counter, needed: int, n_pages: int) -> list[_EdgeLine]:
    by_form: dict[str, list[_EdgeLine]] = defaultdict(list)
    for page_edges in edges:
        for edge in page_edges:
            by_form[edge.form].append(edge)
    furniture = []
    for form, group in by_form.items():
        pages_needed = needed
        if _is_short(form):
            pages_needed = max(needed, math.ceil(SHORT_LINE_PAGE_SHARE * n_pages))
        n_edge_pages = len({edge.page for edge in group})
        if n_edge_pages < pages_needed or body[form] > MAX_BODY_SHARE * n_edge_pages:
            continue
        furniture += _same_text(group, pages_needed) + _numbered_like_pages(group, pages_needed)
    return sorted(set(furniture), key=lambda edge: (edge.page, edge.index))


def _is_short(form: str) -> bool:
    return len(form.split()) < 2 or sum(ch.isalpha() for ch in form) < 4


def _same_text(group: list[_EdgeLine], pages_needed: int) -> list[_EdgeLine]:
    """Lines whose exact text (case aside) repeats on enough pages: a running title, a watermark, a date."""
    pages_of: dict[str, set[int]] = defaultdict(set)
    for edge in group:
        pages_of[edge.text.lower()].add(edge.page)
    return [edge for edge in group if len(pages_of[edge.text.lower()]) >= pages_needed]


def _numbered_like_pages(group: list[_EdgeLine], pages_needed: int) -> list[_EdgeLine]:
    """Lines whose number runs with the page ("Closed syllable word lists 7" on page 7), not "Chapter 2".

    A running header stands once on a page and is no sentence: a form seen twice at one page's edge
    ("Step 3 ...", "Step 4 ...") or ending a sentence is numbered text whose number may follow the pages
    by chance.
    """
    if len({edge.page for edge in group}) < len(group):
        return []
    if any(_ends_a_sentence(edge.text) for edge in group):
        return []  # "Table 3 lists the tenders." on page 3: prose whose number follows the page by chance
    pages_of: dict[tuple[int, int], set[int]] = defaultdict(set)
    for edge in group:
        for position, digits in enumerate(_DIGITS.findall(edge.text)):
            pages_of[(position, int(digits) - edge.page)].add(edge.page)
    if not pages_of:
        return []
    (position, offset), pages = max(pages_of.items(), key=lambda item: len(item[1]))
    if len(pages) < max(pages_needed, MIN_SEQUENCE_SHARE * len(group)):
        return []
    return [edge for edge in group if _number_at(edge.text, position) == offset + edge.page]


def _ends_a_sentence(text: str) -> bool:
    return text.rstrip("\"')\u201d\u2019").endswith((".", "!", "?")) and len(text.split()) > 2


def _number_at(text: str, position: int) -> int | None:
    runs = _DIGITS.findall(text)
    return int(runs[position]) if position < len(runs) else None


def _merged_lines(edges: list[list[_EdgeLine]], edits: dict, repeated: list[_EdgeLine]):
    """(edge, what stays, what goes) for a page's outermost line that begins or ends with a long furniture text
    of the same edge: two runs pypdf joined on one baseline ("SCIENCE, VOL. 162" and the download stamp)."""
    texts = sorted(
        {(edge.kind, edge.text.lower()) for edge in repeated if len(edge.text) >= MIN_MERGED_CHARS},
        key=lambda item: (len(item[1]), item[1]),  # ties by text: the same cut in every run
        reverse=True,
    )
    for page_edges in edges:
        for edge in _outermost(page_edges, edits):
            for kind, furniture in texts:
                cut = _cut(edge.text, furniture) if kind == edge.kind else None
                if cut:
                    yield edge, *cut
                    break


def _outermost(page_edges: list[_EdgeLine], edits: dict) -> list[_EdgeLine]:
    """The first line of the page if it is a header line and the last if a footer line, furniture removed."""
    remaining = [edge for edge in page_edges if (edge.page, edge.index) not in edits]
    if not remaining:
        return []
    first, last = remaining[0], remaining[-1]
    outermost = [first] if first.kind == "header" else []
    if last.kind == "footer" and last is not first:
        outermost.append(last)
    return outermost


def _cut(text: str, furniture: str) -> tuple[str, str] | None:
    """(what stays, what goes) when text ends or begins with the furniture text at a word boundary.

    A line that begins with it and runs on in lowercase is a sentence quoting the title, not a merge.
    """
    lowered, size = text.lower(), len(furniture)
    if len(lowered) != len(text) or len(lowered) <= size:
        return None  # lowercasing changed the length ("İ"): positions in the lowered text would cut real words
    if lowered.endswith(furniture) and lowered[-size - 1] == " ":
        return text[:-size].strip(), text[-size:]
    if lowered.startswith(furniture) and lowered[size] == " " and not text[size:].strip()[:1].islower():
        return text[size:].strip(), text[:size]
    return None


def _removed(edge: _EdgeLine, text: str) -> RemovedLine:
    kind = "page_number" if _page_number_of(text) is not None else edge.kind
    return RemovedLine(edge.page + 1, text, kind)


# --- page numbers -----------------------------------------------------------------------------------


def _page_numbers(edges: list[list[_EdgeLine]], edits: dict, needed: int) -> list[_EdgeLine]:
    """Edge lines that are a page number following the page sequence (front matter may count apart, in roman)."""
    candidates = []
    for page_edges in edges:
        for edge in page_edges:
            text = edits.get((edge.page, edge.index), edge.text)
            number = _page_number_of(text) if text else None
            if number is not None:
                family, value = number
                candidates.append((family, value - edge.page, _EdgeLine(edge.page, edge.index, text, edge.kind)))
    pages_of: dict[tuple[str, int], set[int]] = defaultdict(set)
    for family, offset, edge in candidates:
        pages_of[(family, offset)].add(edge.page)
    return [edge for family, offset, edge in candidates if len(pages_of[(family, offset)]) >= needed]


def _page_number_of(text: str) -> tuple[str, int] | None:
    """("arabic" or "roman", value) when the whole line is a page number."""
    for pattern in _PAGE_NUMBER_LINES:
        match = pattern.fullmatch(text)
        if match:
            return "arabic", int(match.group(1))
    match = _ROMAN_PAGE_NUMBER.fullmatch(text)
    if match and match.group(1).islower():  # "I" or "C" alone is more often a heading or an initial
        value = _roman_value(match.group(1))
        return ("roman", value) if value else None
    return None


def _roman_value(numeral: str) -> int | None:
    values = [_ROMAN_VALUES[ch] for ch in numeral]
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    canonical = _to_roman(total) if total > 0 else ""
    return total if canonical == numeral else None  # "iiii" or "vx" is a word fragment, not a numeral


def _to_roman(value: int) -> str:
    digits = [(100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]
    numeral = ""
    for amount, letters in digits:
        while value >= amount:
            numeral += letters
            value -= amount
    return numeral


# --- rebuilding the pages ---------------------------------------------------------------------------


def _apply(pages: list[str], lines: list[list[str]], edits: dict[tuple[int, int], str]) -> list[str]:
    edited_pages = {page_number for page_number, _ in edits}
    cleaned = []
    for page_number, (page, page_lines) in enumerate(zip(pages, lines)):
        if page_number not in edited_pages:
            cleaned.append(page)
            continue
        kept = []
        for index, line in enumerate(page_lines):
            edited = edits.get((page_number, index))
            if edited is None:
                kept.append(line)  # blank lines too: they end paragraphs
            elif edited:
                kept.append(edited)
        cleaned.append("\n".join(kept))
    return cleaned
