"""Structure-aware chunking: sections (headings) and paragraphs are kept whole where they fit.

A chunk never spans two sections. Paragraphs are packed up to `max_tokens`; a paragraph that is
too long is split at sentence boundaries, and the pieces of one paragraph share up to
`overlap_tokens` of trailing sentences so a fact cut at a boundary is still retrievable.
Table-like lines (mostly numbers and short cells) are never joined into a paragraph nor taken for a
heading: a run of them is a block of its own, one line per piece, packed into chunks of kind "table"
that hold no prose. Their text is kept, so retrieval still finds it.
Ids are `<doc_id>#<n>`, counted within the document, so they only change when that document does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_eval_pipeline.core.text import count_tokens, is_table_like, sha256, split_sentences, tokens
from rag_eval_pipeline.ingest.furniture import is_furniture_text
from rag_eval_pipeline.ingest.parsing import Document

PROSE, TABLE = "prose", "table"


@dataclass(frozen=True)
class ChunkingSettings:
    max_tokens: int = 180
    overlap_tokens: int = 30

    def __post_init__(self) -> None:
        if self.max_tokens < 16:
            raise ValueError(f"max_tokens must be at least 16, got {self.max_tokens}")
        if not 0 <= self.overlap_tokens < self.max_tokens // 2:
            raise ValueError("overlap_tokens must be >= 0 and less than half of max_tokens")


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    position: int
    heading: str
    page_start: int
    page_end: int
    text: str
    n_tokens: int
    content_hash: str
    kind: str  # PROSE or TABLE


@dataclass(frozen=True)
class _Block:
    """A paragraph (or piece of one), or a run of table lines, with the section and page it belongs to."""

    heading: str
    page: int
    sentences: tuple[str, ...]  # a table's lines, one each
    kind: str = PROSE


@dataclass(frozen=True)
class _Group:
    """The pieces of one chunk: (text, page) pairs of a single kind."""

    kind: str
    pieces: list[tuple[str, int]]


_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")


def chunk_document(document: Document, config: ChunkingSettings = ChunkingSettings()) -> list[Chunk]:
    groups = [  # (heading, group) in document order
        (heading, group)
        for heading, section_blocks in _by_section(_blocks(document))
        for group in _pack_section(section_blocks, config)
    ]
    return [_chunk(document, position, heading, group) for position, (heading, group) in enumerate(groups)]


def _chunk(document: Document, position: int, heading: str, group: _Group) -> Chunk:
    text = " ".join(sentence for sentence, _ in group.pieces)
    pages = [page for _, page in group.pieces]
    return Chunk(
        chunk_id=f"{document.doc_id}#{position}",
        doc_id=document.doc_id,
        position=position,
        heading=heading,
        page_start=min(pages),
        page_end=max(pages),
        text=text,
        n_tokens=count_tokens(text),
        content_hash=sha256(text),
        kind=group.kind,
    )


def _flush(blocks: list[_Block], heading: str, page_number: int, paragraph: list[str], table: list[str]) -> None:
    """The paragraph and the table rows gathered so far become blocks under the current heading; both are emptied."""
    sentences = tuple(split_sentences(_join_lines(paragraph)))
    if sentences:
        blocks.append(_Block(heading, page_number, sentences))
    paragraph.clear()
    if table:
        blocks.append(_Block(heading, page_number, tuple(table), TABLE))
    table.clear()


def _blocks(document: Document) -> list[_Block]:
    heading = document.title
    blocks: list[_Block] = []
    for page_number, page in enumerate(document.pages, start=1):
        paragraph: list[str] = []
        table: list[str] = []

        previous = ""
        lines = page.splitlines()
        rows = table_rows(lines)
        # The width of wrapped prose; short table rows would make every prose line look wide.
        widths = sorted(len(line.strip()) for index, line in enumerate(lines) if line.strip() and index not in rows)
        typical_width = widths[len(widths) // 2] if widths else 0
        for index, line in enumerate(lines):
            in_table = index in rows
            new_heading = None if in_table else _heading_of(line, previous, typical_width, document.format)
            previous = line.strip() or "."  # a blank line ends a paragraph as a full stop does
            if new_heading:
                _flush(blocks, heading, page_number, paragraph, table)
                heading = new_heading
            elif not line.strip():
                _flush(blocks, heading, page_number, paragraph, table)
            elif in_table:
                if paragraph:
                    _flush(blocks, heading, page_number, paragraph, table)
                table.append(" ".join(line.split()))
            else:
                if table:
                    _flush(blocks, heading, page_number, paragraph, table)
                paragraph.append(line.strip())
        _flush(blocks, heading, page_number, paragraph, table)
    return blocks


def table_rows(lines: list[str]) -> set[int]:
    """Indexes of the lines that read as table rows.

    A table-like line joins a table when a neighbour is table-like too, or when it starts afresh (after a
    blank line or a finished sentence) and does not run on into the next line; a lone number-heavy line
    inside a running sentence stays prose.
    """
    filled = [index for index, line in enumerate(lines) if line.strip()]
    table_like = {index for index in filled if is_table_like(lines[index])}
    rows = set()
    for position, index in enumerate(filled):
        if index not in table_like:
            continue
        before = filled[position - 1] if position > 0 else None
        after = filled[position + 1] if position + 1 < len(filled) else None
        starts_afresh = before is None or before != index - 1 or lines[before].rstrip()[-1:] in ".!?:"
        # A lone line that runs on into the next ("... to 3,400 (2010), / driven by ...") is prose.
        next_line = lines[index + 1] if after == index + 1 else None
        runs_on = next_line is not None and (lines[index].rstrip()[-1:] in ",;" or next_line.strip()[:1].islower())
        if before in table_like or after in table_like or (starts_afresh and not runs_on):
            rows.add(index)
    return rows


def _join_lines(lines: list[str]) -> str:
    """Lines of one paragraph as one text; a word hyphenated across a line break is made whole."""
    text = ""
    for line in lines:
        if len(text) > 1 and text.endswith("-") and text[-2].isalpha() and line[:1].islower():
            text = text[:-1] + line
        else:
            text = f"{text} {line}" if text else line
    return text


def _heading_of(line: str, previous: str, typical_width: int, doc_format: str) -> str | None:
    match = _MD_HEADING.match(line)
    if match and doc_format in ("markdown", "text"):
        return match.group(2).strip()
    if doc_format in ("pdf", "text"):
        # PDF and plain text have no markup (a text file may still use "#"). A heading reads as a short
        # capitalised line with no punctuation, standing after a finished sentence or a blank line and
        # clearly narrower than the wrapped lines; otherwise a title runs into the first sentence.
        stripped = line.strip()
        words = stripped.split()
        after_sentence = not previous or previous[-1] in ".!?:"
        if (
            after_sentence
            and len(stripped) < 0.6 * typical_width
            and 1 <= len(words) <= 8
            and stripped[0].isupper()
            and not re.search(r"[.,;:!?\"')]$|,", stripped)
            and not stripped.isdigit()
            # A page number, a date alone ("August 2015") or a table row is no section title.
            and not is_furniture_text(stripped)
            and not is_table_like(stripped)
        ):
            return stripped
    return None


def _by_section(blocks: list[_Block]):
    current: list[_Block] = []
    for block in blocks:
        if current and block.heading != current[-1].heading:
            yield current[0].heading, current
            current = []
        current.append(block)
    if current:
        yield current[0].heading, current


def _pack_section(blocks: list[_Block], config: ChunkingSettings) -> list[_Group]:
    groups: list[_Group] = []
    for kind, run in _runs_of_one_kind(blocks):
        groups += [_Group(kind, pieces) for pieces in _pack_run(run, config)]
    return groups


def _runs_of_one_kind(blocks: list[_Block]):
    """Consecutive blocks of the same kind: prose and tables never share a chunk."""
    current: list[_Block] = []
    for block in blocks:
        if current and block.kind != current[-1].kind:
            yield current[0].kind, current
            current = []
        current.append(block)
    if current:
        yield current[0].kind, current


def _pack_run(blocks: list[_Block], config: ChunkingSettings) -> list[list[tuple[str, int]]]:
    groups: list[list[tuple[str, int]]] = []
    current: list[tuple[str, int]] = []
    size = 0
    for block in blocks:
        pieces = [(piece, block.page) for sentence in block.sentences for piece in _fit(sentence, config.max_tokens)]
        block_size = sum(count_tokens(piece) for piece, _ in pieces)
        # Start a new chunk at a paragraph boundary when the whole paragraph would not fit, unless
        # the current chunk is still a fragment (a byline, a one-line paragraph): then fill it up.
        if current and size + block_size > config.max_tokens and size >= config.max_tokens // 4:
            groups.append(current)
            current, size = [], 0
        for piece, page in pieces:
            piece_size = count_tokens(piece)
            if current and size + piece_size > config.max_tokens:
                groups.append(current)
                current = _overlap(current, config.overlap_tokens)
                size = sum(count_tokens(s) for s, _ in current)
                if size + piece_size > config.max_tokens:  # no room for the overlap beside this piece
                    current, size = [], 0
            current.append((piece, page))
            size += piece_size
    # The last group may hold nothing but the overlap carried from the previous one.
    if current and not (groups and current == _overlap(groups[-1], config.overlap_tokens)):
        groups.append(current)
    return groups


def _overlap(group: list[tuple[str, int]], overlap_tokens: int) -> list[tuple[str, int]]:
    carried: list[tuple[str, int]] = []
    size = 0
    for sentence, page in reversed(group):
        size += count_tokens(sentence)
        if size > overlap_tokens:
            break
        carried.insert(0, (sentence, page))
    return carried


# A "word" longer than this is data (base64, a 2 MB line without spaces), not prose. It is cut, so a
# chunk is bounded in characters too, not only in tokens; embedding tokenizers drop such words anyway.
MAX_TOKEN_CHARS = 100


def _fit(sentence: str, max_tokens: int) -> list[str]:
    """A sentence longer than a chunk is cut into token windows (rare: tables, run-on PDF text)."""
    sentence_tokens = tokens(sentence)
    if len(sentence_tokens) <= max_tokens and all(len(token) <= MAX_TOKEN_CHARS for token in sentence_tokens):
        return [sentence]
    sentence_tokens = [
        token[i : i + MAX_TOKEN_CHARS] for token in sentence_tokens for i in range(0, len(token), MAX_TOKEN_CHARS)
    ]
    window = max_tokens // 2
    return [" ".join(sentence_tokens[i : i + window]) for i in range(0, len(sentence_tokens), window)]
