"""Reading a tenant folder: good files become documents, bad files become rejections with a reason."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
from rag_eval_pipeline.ingest.parsing import (
    Document,
    UnreadableDocument,
    doc_id_for,
    read_document,
    read_documents,
)
from rag_eval_pipeline_tests.support import awkward_pdfs as awkward

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "data" / "tenants" / "demo"
DEMO_PDF = DEMO / "customer-sla-contract-summary.pdf"


def _image_only_pdf(path: Path) -> Path:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 120, 60, style="DF")  # drawing only: no text object on the page
    pdf.output(str(path))
    return path


def _flat(text: str) -> str:
    return " ".join(text.split())


def _text_pdf(path: Path, lines: list[str], title: str | None = None) -> Path:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    for line in lines:
        pdf.cell(0, 10, line, new_x="LMARGIN", new_y="NEXT")
    if title:
        pdf.set_title(title)
    pdf.output(str(path))
    return path


# --- the demo corpus -------------------------------------------------------------------------


def test_demo_corpus_reads_every_file_without_rejection():
    result = read_documents(DEMO)

    assert result.rejections == []
    files = sorted(p.name for p in DEMO.iterdir() if p.is_file() and not p.name.startswith("."))
    assert len(files) == 7
    assert sorted(d.path for d in result.documents) == files
    formats = sorted(d.format for d in result.documents)
    assert formats == ["markdown"] * 4 + ["pdf"] * 2 + ["text"]
    for document in result.documents:
        assert document.text.strip(), document.path
        assert document.content_hash == hashlib.sha256((DEMO / document.path).read_bytes()).hexdigest()


def test_demo_pdfs_take_their_title_from_pdf_metadata():
    documents = {d.path: d for d in read_documents(DEMO).documents}
    pdfs = [d for d in documents.values() if d.format == "pdf"]

    assert len(pdfs) == 2
    for document in pdfs:
        metadata_title = PdfReader(DEMO / document.path).metadata.title
        assert metadata_title, f"{document.path} should carry a /Title"
        assert document.title == metadata_title
        assert document.title != Path(document.path).stem  # not the file-name fallback
    # A multi-page PDF keeps one entry per page.
    assert len(documents["warehouse-safety-standard.pdf"].pages) == len(
        PdfReader(DEMO / "warehouse-safety-standard.pdf").pages
    )


def test_markdown_title_is_its_first_heading_without_hashes():
    documents = {d.path: d for d in read_documents(DEMO).documents}

    first_line = (DEMO / "data-retention-policy.md").read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith("# ")
    assert documents["data-retention-policy.md"].title == first_line[2:].strip()


def test_pdf_metadata_title_wins_over_first_line(tmp_path):
    _text_pdf(tmp_path / "report.pdf", ["First line of the body text", "Second line."], title="Metadata Title")

    document = read_document(tmp_path / "report.pdf", "report.pdf")

    assert document.title == "Metadata Title"
    assert "First line of the body text" in document.text


def test_pdf_without_metadata_title_falls_back_to_first_line(tmp_path):
    _text_pdf(tmp_path / "report.pdf", ["Quarterly Safety Review", "The forklift audit passed."])

    document = read_document(tmp_path / "report.pdf", "report.pdf")

    assert document.title == "Quarterly Safety Review"


# --- bad inputs: each rejected with a clear reason, the rest still read ----------------------


BAD_FILES = {
    "locked.pdf": ("encrypted", "password"),
    "random-bytes.pdf": ("corrupt",),
    "truncated.pdf": ("corrupt",),
    "empty.md": ("empty",),
    "scan.pdf": ("no extractable text", "image-only"),
    "latin1.txt": ("utf-8",),
    "slides.pptx": ("unsupported", ".pptx"),
}


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory, awkward_corpus) -> Path:
    """Two good demo documents beside our own bad files: encrypted (AES-256, a user password), random bytes,
    half a PDF, an empty file, a scanned page (text as pixels, no text layer), Latin-1 text, a PowerPoint deck."""
    folder = tmp_path_factory.mktemp("mixed")
    shutil.copy(DEMO / "data-retention-policy.md", folder / "data-retention-policy.md")
    shutil.copy(DEMO_PDF, folder / "customer-sla.pdf")
    for name in BAD_FILES:
        shutil.copy(awkward_corpus.bad / name, folder / name)
    return folder


def test_bad_files_are_rejected_and_good_files_still_read(mixed_folder):
    result = read_documents(mixed_folder)

    assert sorted(d.path for d in result.documents) == ["customer-sla.pdf", "data-retention-policy.md"]
    assert sorted(r.path for r in result.rejections) == sorted(BAD_FILES)
    # The good documents are complete, not damaged by their neighbours.
    by_path = {d.path: d for d in result.documents}
    assert by_path["customer-sla.pdf"].title == "Customer SLA Contract Summary"
    assert by_path["data-retention-policy.md"].text == (DEMO / "data-retention-policy.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("filename", sorted(BAD_FILES))
def test_each_rejection_names_its_reason(mixed_folder, filename):
    reasons = {r.path: r.reason for r in read_documents(mixed_folder).rejections}

    reason = reasons[filename].lower()
    for keyword in BAD_FILES[filename]:
        assert keyword.lower() in reason, f"{filename}: {reasons[filename]!r} should mention {keyword!r}"


def test_a_pdf_of_drawings_only_is_rejected_as_image_only(tmp_path):
    _image_only_pdf(tmp_path / "drawing.pdf")

    with pytest.raises(UnreadableDocument, match="no extractable text: image-only"):
        read_document(tmp_path / "drawing.pdf", "drawing.pdf")


def test_invalid_utf8_reason_points_at_the_byte(tmp_path):
    (tmp_path / "notes.txt").write_bytes(b"abc\xffdef")

    with pytest.raises(UnreadableDocument, match=r"UTF-8.*byte 3"):
        read_document(tmp_path / "notes.txt", "notes.txt")


def test_whitespace_only_file_is_empty(tmp_path):
    (tmp_path / "blank.md").write_text("  \n\n\t\n", encoding="utf-8")

    with pytest.raises(UnreadableDocument, match="empty"):
        read_document(tmp_path / "blank.md", "blank.md")


def test_file_without_extension_is_unsupported(tmp_path):
    (tmp_path / "README").write_text("Some text.", encoding="utf-8")

    with pytest.raises(UnreadableDocument, match="unsupported"):
        read_document(tmp_path / "README", "README")


def test_pdf_with_only_an_owner_password_is_readable(tmp_path):
    writer = PdfWriter(clone_from=DEMO_PDF)
    writer.encrypt(user_password="", owner_password="owner-secret", algorithm="AES-256")
    writer.write(tmp_path / "owner-only.pdf")
    assert PdfReader(tmp_path / "owner-only.pdf").is_encrypted

    document = read_document(tmp_path / "owner-only.pdf", "owner-only.pdf")

    assert "service level agreement" in document.text


def test_pdf_with_a_user_password_is_rejected_as_encrypted(tmp_path):
    writer = PdfWriter(clone_from=DEMO_PDF)
    writer.encrypt(user_password="user-secret", owner_password="owner-secret", algorithm="AES-256")
    writer.write(tmp_path / "locked.pdf")

    with pytest.raises(UnreadableDocument, match="encrypted"):
        read_document(tmp_path / "locked.pdf", "locked.pdf")


def test_missing_folder_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        read_documents(tmp_path / "does-not-exist")


def test_a_file_is_not_a_folder(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nText.", encoding="utf-8")

    with pytest.raises(FileNotFoundError):
        read_documents(tmp_path / "a.md")


def test_hidden_files_are_skipped_not_rejected(tmp_path):
    (tmp_path / "policy.md").write_text("# Policy\n\nKeep receipts.", encoding="utf-8")
    (tmp_path / ".DS_Store").write_bytes(b"\x00\x01binary")

    result = read_documents(tmp_path)

    assert [d.path for d in result.documents] == ["policy.md"]
    assert result.rejections == []


def test_utf8_bom_and_uppercase_suffix(tmp_path):
    (tmp_path / "NOTES.MD").write_bytes("\ufeff# Notes\n\nBody.".encode("utf-8"))

    document = read_documents(tmp_path).documents[0]

    assert document.format == "markdown"
    assert document.title == "Notes"
    assert not document.text.startswith("\ufeff")


# --- awkward but readable PDFs of our own (support/awkward_pdfs.py) ---------------------------


READABLE_EDGE_CASES = {
    "two-columns.pdf": "Ostmark 8.9 83,879 Lindau German",
    "right-to-left.pdf": awkward.ARABIC_SENTENCES[0],
    "code-and-formula.pdf": awkward.CODE_LISTING[2].strip(),
    "figure-page.pdf": "Reading the plan",
    "outline.pdf": awkward.OUTLINE_SECTIONS[-1],
    "owner-password-only.pdf": "Tidal Scheduling at Small Ports",
}


@pytest.mark.parametrize("filename", sorted(READABLE_EDGE_CASES))
def test_our_edge_case_pdfs_are_read_with_text(awkward_corpus, filename):
    document = read_document(awkward_corpus.edge / filename, filename)

    assert isinstance(document, Document)
    assert document.format == "pdf"
    assert all(isinstance(page, str) for page in document.pages)
    assert len(document.text.strip()) > 500
    assert READABLE_EDGE_CASES[filename] in _flat(document.text)


def test_right_to_left_text_is_read_in_reading_order(awkward_corpus):
    text = _flat(read_document(awkward_corpus.edge / "right-to-left.pdf", "rtl.pdf").text)

    assert "\u0627" in text  # Arabic alef
    for sentence in awkward.ARABIC_SENTENCES + awkward.HEBREW_SENTENCES:
        assert sentence in text  # written right to left on the page, read back first word first
    # Where the direction changes, the order of the runs is pypdf's guess; every word still comes through.
    assert all(word.rstrip(".") in text for word in awkward.MIXED_DIRECTION_LINE.split())


def test_two_columns_are_read_column_after_column(awkward_corpus):
    document = read_document(awkward_corpus.edge / "two-columns.pdf", "two-columns.pdf")

    joined = " ".join(c.text for c in chunk_document(document, ChunkingSettings(max_tokens=180, overlap_tokens=0)))

    assert len(awkward_corpus.column_paragraphs) > 10
    for paragraph in awkward_corpus.column_paragraphs:  # the left column's lines, then the right one's
        assert paragraph in joined


def test_a_code_listing_keeps_its_lines(awkward_corpus):
    document = read_document(awkward_corpus.edge / "code-and-formula.pdf", "code.pdf")

    lines = [line.strip() for page in document.pages for line in page.splitlines()]

    assert [line.strip() for line in awkward.CODE_LISTING] == [
        line for line in lines if line in {code.strip() for code in awkward.CODE_LISTING}
    ]
    assert all(formula in lines for formula in awkward.FORMULA_LINES)


def test_an_image_only_page_inside_a_text_pdf_does_not_reject_it(awkward_corpus):
    document = read_document(awkward_corpus.edge / "figure-page.pdf", "figure-page.pdf")

    assert len(document.pages) == 3
    assert document.pages[1].strip() == ""
    assert document.pages[0].strip() and document.pages[2].strip()


def test_a_pdf_with_an_outline_is_read_section_by_section(awkward_corpus):
    path = awkward_corpus.edge / "outline.pdf"
    assert [entry.title for entry in PdfReader(path).outline] == awkward.OUTLINE_SECTIONS

    document = read_document(path, "outline.pdf")

    assert len(document.pages) == len(awkward.OUTLINE_SECTIONS)
    headings = [c.heading for c in chunk_document(document)]
    assert list(dict.fromkeys(headings)) == awkward.OUTLINE_SECTIONS  # each section's chunks under its own title


def test_our_encrypted_edge_case_is_the_only_rejection_in_our_edge_cases(awkward_corpus):
    result = read_documents(awkward_corpus.edge)

    assert [(r.path, r.reason) for r in result.rejections] == [("locked.pdf", "encrypted PDF: a password is required")]
    assert sorted(d.path for d in result.documents) == sorted(READABLE_EDGE_CASES)


# --- the public edge-case PDFs in ../shared/corpus, where present --------------------------------


@pytest.mark.parametrize(
    "filename, must_contain",
    [
        ("pysample__multicolumn.pdf", "Lorem"),
        ("docling__right_to_left_01.pdf", "\u0627"),  # Arabic alef: the right-to-left text came through
        ("docling__code_and_formula.pdf", "JavaScript"),
    ],
)
def test_edge_case_pdfs_are_read_with_text(shared_corpus, filename, must_contain):
    document = read_document(shared_corpus / "edge_cases" / filename, filename)

    assert isinstance(document, Document)
    assert document.format == "pdf"
    assert all(isinstance(page, str) for page in document.pages)
    assert len(document.text.strip()) > 500
    assert must_contain in document.text


def test_encrypted_edge_case_is_the_only_rejection_in_edge_cases(shared_corpus):
    edge_cases = shared_corpus / "edge_cases"
    result = read_documents(edge_cases)

    assert [r.path for r in result.rejections] == ["pysample__libreoffice-writer-password.pdf"]
    assert len(result.documents) == len(list(edge_cases.glob("*.pdf"))) - 1


# --- doc ids ---------------------------------------------------------------------------------


def test_doc_id_is_derived_from_the_relative_path():
    assert doc_id_for("data-retention-policy.md") == "data-retention-policy.md"
    assert doc_id_for("Policies/Travel Policy (v2).md") == "Policies/Travel Policy (v2).md"
    assert doc_id_for("notes #3 100%.md") == "notes %233 100%25.md"  # "#" separates chunk numbers
    assert doc_id_for("sub/dir/file.pdf") == "sub/dir/file.pdf"


def test_doc_id_is_stable_across_reads_and_unaffected_by_other_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Travel Rules.md").write_text("# Travel\n\nBook early.", encoding="utf-8")
    first = {d.path: d.doc_id for d in read_documents(tmp_path).documents}

    (tmp_path / "aaa.md").write_text("# First\n\nSorted before.", encoding="utf-8")
    (tmp_path / "sub" / "zzz.txt").write_text("Sorted after.", encoding="utf-8")
    second = {d.path: d.doc_id for d in read_documents(tmp_path).documents}

    assert first == {"sub/Travel Rules.md": "sub/Travel Rules.md"}
    assert second["sub/Travel Rules.md"] == first["sub/Travel Rules.md"]
    assert len(set(second.values())) == 3


def test_doc_id_changes_with_the_path_not_with_the_content(tmp_path):
    path = tmp_path / "policy.md"
    path.write_text("# Policy\n\nVersion one.", encoding="utf-8")
    before = read_document(path, "policy.md")
    path.write_text("# Policy\n\nVersion two, rewritten.", encoding="utf-8")
    after = read_document(path, "policy.md")
    moved = read_document(path, "archive/policy.md")

    assert before.doc_id == after.doc_id
    assert before.content_hash != after.content_hash
    assert moved.doc_id != before.doc_id


def test_distinct_files_get_distinct_doc_ids(tmp_path):
    (tmp_path / "Report.md").write_text("# Upper\n\nThe upper-case report.", encoding="utf-8")
    (tmp_path / "report.md").write_text("# Lower\n\nThe lower-case report.", encoding="utf-8")
    (tmp_path / "a b.md").write_text("# Space\n\nWith a space.", encoding="utf-8")
    (tmp_path / "a-b.md").write_text("# Dash\n\nWith a dash.", encoding="utf-8")

    documents = read_documents(tmp_path).documents

    assert len(documents) == 4
    assert len({d.doc_id for d in documents}) == 4


def test_hidden_files_and_folders_are_not_documents(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (tmp_path / ".DS_Store").write_bytes(b"\x00\x01")
    (tmp_path / "policy.md").write_text("# Policy\n\nRefunds take 14 days.", encoding="utf-8")

    result = read_documents(tmp_path)

    assert [d.path for d in result.documents] == ["policy.md"]
    assert result.rejections == []
