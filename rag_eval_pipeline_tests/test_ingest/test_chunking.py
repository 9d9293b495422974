"""Structure-aware chunking: size limit, section boundaries, stable ids, overlap, no lost text."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from rag_eval_pipeline.core.text import split_sentences, tokens
from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
from rag_eval_pipeline.ingest.parsing import Document, read_document, read_documents

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "data" / "tenants" / "demo"
DEMO_MARKUP = [
    "data-retention-policy.md",
    "expense-and-travel-policy.md",
    "incident-response-runbook.md",
    "routewise-api-spec.md",
    "oncall-handbook.txt",
]


# An independent token counter (same definition as the module's docstring: words and punctuation marks).
_TOKEN = re.compile(r"\w+|[^\w\s]")


def n_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _markdown(tmp_path: Path, name: str, text: str) -> Document:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return read_document(tmp_path / name, name)


def _sections(markdown: str) -> list[tuple[str, list[str]]]:
    """(heading, paragraphs) as a reader sees the markdown: a paragraph is a run of non-blank lines."""
    sections: list[tuple[str, list[str]]] = []
    paragraph: list[str] = []

    def flush():
        if paragraph:
            sections[-1][1].append(" ".join(paragraph))
            paragraph.clear()

    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.+?)\s*$", line)
        if heading:
            flush()
            sections.append((heading.group(1), []))
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
    flush()
    return sections


def _long_paragraph(n: int = 12) -> str:
    ordinals = [
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
    ]
    return " ".join(f"The {ordinals[i]} rule says that crates in aisle {i + 1} are checked weekly." for i in range(n))


# --- size limit ------------------------------------------------------------------------------


def _assert_within_max_tokens(document: Document, config: ChunkingSettings) -> None:
    chunks = chunk_document(document, config)

    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.n_tokens == n_tokens(chunk.text)
        assert chunk.n_tokens <= config.max_tokens, (chunk.chunk_id, chunk.n_tokens)
        assert 1 <= chunk.page_start <= chunk.page_end <= len(document.pages)


@pytest.mark.parametrize("config", [ChunkingSettings(), ChunkingSettings(64, 0), ChunkingSettings(16, 0)], ids=str)
@pytest.mark.parametrize(
    "filename",
    [
        "furniture/story.pdf",
        "furniture/data-sharing-agreement.pdf",
        "furniture/annual-report.pdf",
        "edge/two-columns.pdf",
    ],
)
def test_no_chunk_of_our_pdfs_exceeds_max_tokens(awkward_corpus, filename, config):
    _assert_within_max_tokens(read_document(awkward_corpus.root / filename, filename), config)


@pytest.mark.parametrize("config", [ChunkingSettings(), ChunkingSettings(64, 0), ChunkingSettings(16, 0)], ids=str)
@pytest.mark.parametrize("filename", ["The-Man-Without-A-Body.pdf", "CC_License_Agreement_of_siMPle.pdf"])
def test_no_chunk_of_a_real_pdf_exceeds_max_tokens(shared_corpus, filename, config):
    _assert_within_max_tokens(read_document(shared_corpus / "pdfs" / filename, filename), config)


@pytest.mark.parametrize("config", [ChunkingSettings(), ChunkingSettings(40, 10), ChunkingSettings(16, 0)], ids=str)
@pytest.mark.parametrize("filename", DEMO_MARKUP)
def test_no_chunk_of_markdown_exceeds_max_tokens(filename, config):
    document = read_document(DEMO / filename, filename)

    chunks = chunk_document(document, config)

    assert chunks
    assert all(c.n_tokens == n_tokens(c.text) <= config.max_tokens for c in chunks)


def test_overlap_never_pushes_a_chunk_over_max_tokens(tmp_path):
    short = "Crates are red."  # 4 tokens: small enough to be carried as overlap
    long = "Every crate in the north aisle is weighed and labelled before the truck leaves the dock today."
    assert n_tokens(short) <= 5 and n_tokens(long) <= 20 and n_tokens(short) + n_tokens(long) > 20
    document = _markdown(tmp_path, "crates.md", f"# Crates\n\n{short} {long}\n")

    chunks = chunk_document(document, ChunkingSettings(max_tokens=20, overlap_tokens=5))

    assert all(c.n_tokens <= 20 for c in chunks), [(c.n_tokens, c.text) for c in chunks]


@pytest.mark.parametrize("filename", ["data-sharing-agreement.pdf", "story.pdf"])
def test_our_pdf_with_overlap_stays_within_max_tokens(awkward_corpus, filename):
    document = read_document(awkward_corpus.furniture / filename, filename)

    chunks = chunk_document(document, ChunkingSettings(max_tokens=64, overlap_tokens=10))

    assert len(chunks) > 10
    assert max(c.n_tokens for c in chunks) <= 64


def test_real_pdf_with_overlap_stays_within_max_tokens(shared_corpus):
    document = read_document(shared_corpus / "pdfs" / "CC_License_Agreement_of_siMPle.pdf", "cc.pdf")

    chunks = chunk_document(document, ChunkingSettings(max_tokens=64, overlap_tokens=10))

    assert max(c.n_tokens for c in chunks) <= 64


# --- section boundaries ----------------------------------------------------------------------


def test_chunks_never_cross_a_markdown_heading(tmp_path):
    text = (
        "# Handbook\n\nThe handbook covers two topics.\n\n"
        "## Alpha\n\nAlpha rules apply to forklifts. Alpha drivers hold a licence.\n\n"
        "## Beta\n\nBeta rules apply to pallets. Beta pallets are wrapped.\n\n"
        "### Gamma\n\nGamma notes are short.\n"
    )
    document = _markdown(tmp_path, "handbook.md", text)

    chunks = chunk_document(document, ChunkingSettings(max_tokens=180, overlap_tokens=10))

    # Everything fits in one chunk by size, yet each section gets its own chunk(s).
    assert [c.heading for c in chunks] == ["Handbook", "Alpha", "Beta", "Gamma"]
    for chunk in chunks:
        words = {"Alpha", "Beta", "Gamma"} & set(re.findall(r"\w+", chunk.text))
        assert words <= {chunk.heading}, (chunk.heading, chunk.text)
    assert "##" not in " ".join(c.text for c in chunks)


@pytest.mark.parametrize("config", [ChunkingSettings(), ChunkingSettings(40, 10)], ids=str)
@pytest.mark.parametrize("filename", DEMO_MARKUP)
def test_every_chunk_of_a_demo_document_lies_within_its_section(filename, config):
    raw = (DEMO / filename).read_text(encoding="utf-8")
    section_of: dict[str, set[str]] = {}
    for heading, paragraphs in _sections(raw):
        for paragraph in paragraphs:
            for sentence in split_sentences(paragraph):
                section_of.setdefault(sentence, set()).add(heading)
    document = read_document(DEMO / filename, filename)

    chunks = chunk_document(document, config)

    headings_seen = []
    for chunk in chunks:
        for sentence in split_sentences(chunk.text):
            assert chunk.heading in section_of.get(sentence, set()), (chunk.chunk_id, chunk.heading, sentence)
        if not headings_seen or headings_seen[-1] != chunk.heading:
            headings_seen.append(chunk.heading)
    # Sections appear in document order and none is split into non-adjacent runs.
    assert headings_seen == [h for h, paragraphs in _sections(raw) if paragraphs]


# --- ids -------------------------------------------------------------------------------------


@pytest.mark.parametrize("filename", ["routewise-api-spec.md", "warehouse-safety-standard.pdf"])
def test_chunk_ids_are_doc_id_hash_position(filename):
    document = read_document(DEMO / filename, filename)

    chunks = chunk_document(document, ChunkingSettings(60, 10))

    assert len(chunks) > 3
    assert [c.chunk_id for c in chunks] == [f"{document.doc_id}#{n}" for n in range(len(chunks))]
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert {c.doc_id for c in chunks} == {document.doc_id}


def test_adding_another_document_does_not_change_a_documents_chunks(tmp_path):
    shutil.copy(DEMO / "routewise-api-spec.md", tmp_path / "routewise-api-spec.md")
    config = ChunkingSettings(60, 10)

    def chunks_of_spec():
        documents = {d.path: d for d in read_documents(tmp_path).documents}
        return [
            (c.chunk_id, c.text, c.content_hash) for c in chunk_document(documents["routewise-api-spec.md"], config)
        ]

    before = chunks_of_spec()
    shutil.copy(DEMO / "data-retention-policy.md", tmp_path / "a-first.md")  # sorts before the spec
    shutil.copy(DEMO / "customer-sla-contract-summary.pdf", tmp_path / "zz-last.pdf")
    after = chunks_of_spec()

    assert len(read_documents(tmp_path).documents) == 3
    assert before == after


def test_identical_text_in_two_documents_gives_distinct_chunk_ids(tmp_path):
    body = "# Same\n\nBoth files say exactly this sentence about pallets.\n"
    a = _markdown(tmp_path, "a.md", body)
    b = _markdown(tmp_path, "b.md", body)

    ids_a = {c.chunk_id for c in chunk_document(a)}
    ids_b = {c.chunk_id for c in chunk_document(b)}

    assert ids_a and ids_b and not ids_a & ids_b


# --- long paragraphs and overlap ------------------------------------------------------------


def test_pieces_of_a_long_paragraph_share_overlap_text(tmp_path):
    paragraph = _long_paragraph(12)
    sentences = split_sentences(paragraph)
    assert len(sentences) == 12 and all(n_tokens(s) <= 20 for s in sentences)
    document = _markdown(tmp_path, "rules.md", f"# Rules\n\n{paragraph}\n")
    config = ChunkingSettings(max_tokens=60, overlap_tokens=20)

    chunks = chunk_document(document, config)

    assert len(chunks) >= 3
    for previous, current in zip(chunks, chunks[1:]):
        prev_sentences, cur_sentences = split_sentences(previous.text), split_sentences(current.text)
        shared = [s for s in cur_sentences if s in prev_sentences]
        assert shared, f"no overlap between {previous.chunk_id} and {current.chunk_id}"
        # The shared text is the tail of one piece and the head of the next, within the overlap budget.
        assert prev_sentences[-len(shared) :] == shared == cur_sentences[: len(shared)]
        assert n_tokens(" ".join(shared)) <= config.overlap_tokens
        # And the next piece adds new text.
        assert len(cur_sentences) > len(shared)


def test_without_overlap_each_sentence_appears_exactly_once(tmp_path):
    paragraph = _long_paragraph(12)
    document = _markdown(tmp_path, "rules.md", f"# Rules\n\n{paragraph}\n")

    chunks = chunk_document(document, ChunkingSettings(max_tokens=60, overlap_tokens=0))

    assert len(chunks) >= 3
    emitted = [s for c in chunks for s in split_sentences(c.text)]
    assert emitted == split_sentences(paragraph)


def test_a_sentence_longer_than_a_chunk_is_split_without_losing_tokens(tmp_path):
    sentence = " ".join(f"word{i}" for i in range(50)) + "."
    document = _markdown(tmp_path, "run-on.md", f"# Run on\n\n{sentence}\n")

    chunks = chunk_document(document, ChunkingSettings(max_tokens=20, overlap_tokens=0))

    assert len(chunks) >= 3
    assert all(c.n_tokens <= 20 for c in chunks)
    assert [t for c in chunks for t in tokens(c.text)] == tokens(sentence)


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "max_tokens, overlap_tokens",
    [(15, 0), (0, 0), (180, -1), (180, 90), (180, 200), (16, 8)],
)
def test_invalid_configs_raise_value_error(max_tokens, overlap_tokens):
    with pytest.raises(ValueError):
        ChunkingSettings(max_tokens=max_tokens, overlap_tokens=overlap_tokens)


@pytest.mark.parametrize("max_tokens, overlap_tokens", [(16, 0), (16, 7), (180, 89), (180, 30)])
def test_boundary_configs_are_accepted(max_tokens, overlap_tokens):
    config = ChunkingSettings(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    assert (config.max_tokens, config.overlap_tokens) == (max_tokens, overlap_tokens)


# --- no text lost ----------------------------------------------------------------------------


@pytest.mark.parametrize("config", [ChunkingSettings(), ChunkingSettings(40, 10)], ids=str)
@pytest.mark.parametrize("filename", DEMO_MARKUP)
def test_every_sentence_of_a_markdown_document_is_in_some_chunk(filename, config):
    raw = (DEMO / filename).read_text(encoding="utf-8")
    sentences = [s for _, paragraphs in _sections(raw) for p in paragraphs for s in split_sentences(p)]
    document = read_document(DEMO / filename, filename)

    texts = [c.text for c in chunk_document(document, config)]

    assert len(sentences) > 20
    missing = [s for s in sentences if not any(s in text for text in texts)]
    assert missing == []


def test_wrapped_lines_and_lists_keep_all_their_words(tmp_path):
    text = (
        "# Packing\n\n"
        "Pallets are wrapped in film\nbefore they leave the dock,\nand the film is recycled.\n\n"
        "- Item one is checked.\n- Item two is weighed.\n\n"
        "Short line.\n"
    )
    document = _markdown(tmp_path, "packing.md", text)

    joined = " ".join(c.text for c in chunk_document(document, ChunkingSettings(16, 0)))

    body = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert tokens(joined) == [t for line in body for t in tokens(line)]


def test_with_no_overlap_the_token_stream_of_a_demo_document_is_preserved():
    document = read_document(DEMO / "oncall-handbook.txt", "oncall-handbook.txt")
    body = [line for line in document.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    chunks = chunk_document(document, ChunkingSettings(16, 0))

    assert [t for c in chunks for t in tokens(c.text)] == [t for line in body for t in tokens(line)]


def test_words_hyphenated_across_lines_of_our_pdf_are_joined(awkward_corpus):
    document = read_document(awkward_corpus.edge / "two-columns.pdf", "two-columns.pdf")
    broken = awkward_corpus.hyphenated
    assert len(broken) >= 10
    for head, tail in broken:
        assert f"{head}-\n{tail}" in document.text  # the raw page text breaks the word at a line end

    joined = " ".join(c.text for c in chunk_document(document))

    for head, tail in broken:
        assert f"{head}- {tail}" not in joined
        assert f" {head}{tail}" in joined


def test_pdf_words_hyphenated_across_lines_are_joined(shared_corpus):
    document = read_document(shared_corpus / "edge_cases" / "pysample__multicolumn.pdf", "multicolumn.pdf")
    assert "adip-\niscing" in document.text  # the raw page text breaks the word at a line end

    joined = " ".join(c.text for c in chunk_document(document))

    assert "adip- iscing" not in joined
    assert "adipiscing" in joined


def test_plain_text_title_and_section_lines_are_headings_not_part_of_a_sentence(tmp_path):
    text = (
        "Loading dock\n\n"
        "The loading dock in Venlo opens at 06:00 on every working day of the year.\n\n"
        "Night shifts\n\n"
        "Night shifts end at 22:00, after which the yard gate is locked by the security team.\n"
    )
    document = _markdown(tmp_path, "dock.txt", text)

    chunks = chunk_document(document, ChunkingSettings())

    by_heading = {c.heading: c.text for c in chunks}
    assert by_heading["Night shifts"].startswith("Night shifts end at 22:00")
    assert all(not c.text.startswith("Loading dock The") for c in chunks)
    assert any(c.text.startswith("The loading dock in Venlo") for c in chunks)
