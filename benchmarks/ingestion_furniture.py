"""Page furniture removed at ingestion, against labels a person wrote by reading the PDFs.

    .venv/bin/python benchmarks/ingestion_furniture.py

Reads every PDF of ../shared/corpus/pdfs and ../shared/corpus/edge_cases (the encrypted one is
skipped) and compares, per file and in total, what ingestion removes as furniture with
benchmarks/labels/pdf_furniture.json (regular expressions matching whole furniture lines, written
before the detector was tuned):

- labelled: lines of the raw pages that are furniture by the labels;
- removed: lines (or the furniture part of a merged line) ingestion removed;
- missed: labelled furniture still in the cleaned pages;
- lost lines / lost words: removed text that the labels do not call furniture (the target is 0);
- table lines: lines the chunker keeps apart as table rows; table chunks: chunks of kind "table";
- furniture headings before / after: chunks whose section heading is a furniture line, chunking the
  raw pages (furniture removal off, the peer) and the cleaned pages, in the same run.

Writes benchmarks/results/ingestion_furniture.json.
"""

from __future__ import annotations

import io
import json
import logging
import platform
import re
import sys
import unicodedata
from dataclasses import replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pypdf import PdfReader  # noqa: E402

from rag_eval_pipeline.ingest import furniture  # noqa: E402
from rag_eval_pipeline.ingest.chunking import TABLE, chunk_document, table_rows  # noqa: E402
from rag_eval_pipeline.ingest.parsing import UnreadableDocument, read_document  # noqa: E402

CORPUS = REPO_ROOT.parent / "shared" / "corpus"
FOLDERS = ("pdfs", "edge_cases")
LABELS = REPO_ROOT / "benchmarks" / "labels" / "pdf_furniture.json"
RESULTS = REPO_ROOT / "benchmarks" / "results" / "ingestion_furniture.json"
_PAGE_FIELD = re.compile(r"\{page(?:\+(\d+))?\}")

logging.getLogger("pypdf").setLevel(logging.ERROR)


def canonical(line: str) -> str:
    """A line as the labels are written against: control characters removed, whitespace collapsed."""
    return " ".join("".join(ch for ch in line if unicodedata.category(ch) != "Cc" or ch.isspace()).split())


class Labels:
    """One file's furniture patterns; {page} and {page+N} are filled in per page."""

    def __init__(self, patterns: list[str]):
        self.patterns = patterns

    def on_page(self, page: int) -> list[re.Pattern]:
        return [re.compile(_PAGE_FIELD.sub(lambda m: str(page + int(m.group(1) or 0)), p)) for p in self.patterns]

    def anywhere(self) -> list[re.Pattern]:
        return [re.compile(_PAGE_FIELD.sub(r"\\d+", p)) for p in self.patterns]

    @staticmethod
    def matches(patterns: list[re.Pattern], line: str) -> bool:
        return any(p.fullmatch(line) for p in patterns)


def raw_pages(path: Path) -> list[str]:
    """The page texts as parsing extracts them, before furniture removal."""
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    if reader.is_encrypted:
        reader.decrypt("")  # read_document has already refused files that need a password
    return [page.extract_text() or "" for page in reader.pages]


def measure_file(path: Path, relative: str, labels: Labels) -> dict:
    document = read_document(path, relative)
    pages = raw_pages(path)
    cleaned = furniture.strip_furniture(pages)
    assert cleaned.pages == document.pages, "ingestion must clean pages exactly as strip_furniture does"
    labelled = missed = 0
    for number, (raw, kept) in enumerate(zip(pages, document.pages), start=1):
        on_page = labels.on_page(number)
        labelled += sum(Labels.matches(on_page, canonical(line)) for line in raw.splitlines())
        missed += sum(Labels.matches(on_page, canonical(line)) for line in kept.splitlines())
    lost = [line for line in cleaned.removed if not _is_labelled(line, pages, labels)]
    return {
        "pages": len(pages),
        "labelled": labelled,
        "removed": len(cleaned.removed),
        "removed_by_kind": {
            kind: sum(1 for r in cleaned.removed if r.kind == kind) for kind in ("header", "footer", "page_number")
        },
        "missed": missed,
        "lost_lines": len(lost),
        "lost_words": sum(len(line.text.split()) for line in lost),
        "lost_examples": [f"p{line.page}: {line.text}" for line in lost[:5]],
        **_table_counts(document),
        **_heading_counts(document, pages, labels),
    }


def _is_labelled(removed: furniture.RemovedLine, pages: list[str], labels: Labels) -> bool:
    """The removed text is furniture, or part of a raw line that is furniture (a merged line's cut part)."""
    on_page = labels.on_page(removed.page)
    text = canonical(removed.text)
    if Labels.matches(on_page, text):
        return True
    lines = (canonical(line) for line in pages[removed.page - 1].splitlines())
    return any(text in line and Labels.matches(on_page, line) for line in lines)


def _table_counts(document) -> dict:
    rows = [canonical(page.splitlines()[i]) for page in document.pages for i in sorted(table_rows(page.splitlines()))]
    chunks = chunk_document(document)
    return {
        "table_lines": len(rows),
        "table_chunks": sum(1 for c in chunks if c.kind == TABLE),
        "table_examples": rows[:3],
    }


def _heading_counts(document, pages: list[str], labels: Labels) -> dict:
    """Chunks whose heading is a furniture line, with furniture removal off (raw pages) and on."""
    metadata_title = (PdfReader(io.BytesIO((CORPUS / document.path).read_bytes())).metadata or {}).get("/Title")
    raw_title = str(metadata_title).strip() if metadata_title and str(metadata_title).strip() else _first_line(pages)
    before = chunk_document(replace(document, pages=pages, title=raw_title or document.title, furniture_lines=0))
    after = chunk_document(document)
    anywhere = labels.anywhere()

    def furniture_headings(chunks) -> list[str]:
        return [c.heading for c in chunks if Labels.matches(anywhere, canonical(c.heading))]

    headings_before, headings_after = furniture_headings(before), furniture_headings(after)
    return {
        "chunks_before": len(before),
        "chunks_after": len(after),
        "furniture_headings_before": len(headings_before),
        "furniture_headings_after": len(headings_after),
        "furniture_heading_examples_before": sorted(set(headings_before))[:3],
        "furniture_heading_examples_after": sorted(set(headings_after))[:3],
    }


def _first_line(pages: list[str]) -> str | None:
    """The title parsing took before furniture removal: the first non-empty line of the first page."""
    return next((line.strip()[:200] for line in pages[0].splitlines() if line.strip()), None) if pages else None


TOTALLED = (
    "pages",
    "labelled",
    "removed",
    "missed",
    "lost_lines",
    "lost_words",
    "table_lines",
    "table_chunks",
    "chunks_before",
    "chunks_after",
    "furniture_headings_before",
    "furniture_headings_after",
)


def main() -> None:
    labels = json.loads(LABELS.read_text(encoding="utf-8"))["files"]
    files: dict[str, dict] = {}
    for folder in FOLDERS:
        for path in sorted((CORPUS / folder).glob("*.pdf")):
            relative = f"{folder}/{path.name}"
            try:
                files[relative] = measure_file(path, relative, Labels(labels.get(relative, [])))
            except UnreadableDocument as error:
                print(f"skipped {relative}: {error}")
                continue
            if relative not in labels:
                files[relative]["unlabelled"] = True
    if not files:
        raise SystemExit(f"no PDF found under {CORPUS}: nothing measured, results left as they were")
    totals = {key: sum(f[key] for f in files.values()) for key in TOTALLED}
    result = {
        "benchmark": "ingestion_furniture",
        "command": "python benchmarks/ingestion_furniture.py",
        "corpus": [f"../shared/corpus/{folder}" for folder in FOLDERS],
        "labels": str(LABELS.relative_to(REPO_ROOT)),
        "settings": {
            "min_document_pages": furniture.MIN_DOCUMENT_PAGES,
            "edge_lines": furniture.EDGE_LINES,
            "min_pages": furniture.MIN_PAGES,
            "min_page_share": furniture.MIN_PAGE_SHARE,
            "short_line_page_share": furniture.SHORT_LINE_PAGE_SHARE,
            "max_body_share": furniture.MAX_BODY_SHARE,
        },
        "python": platform.python_version(),
        "totals": totals,
        "files": files,
    }
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _print_table(files, totals)
    print(f"wrote {RESULTS.relative_to(REPO_ROOT)}")


def _print_table(files: dict[str, dict], totals: dict) -> None:
    header = f"{'file':46} {'pages':>5} {'label':>5} {'remov':>5} {'miss':>5} {'lostW':>5} {'table':>5} {'hdgB':>4} {'hdgA':>4}"
    print(header)
    print("-" * len(header))
    for name, row in [*files.items(), ("TOTAL", totals)]:
        print(
            f"{name[:46]:46} {row['pages']:5} {row['labelled']:5} {row['removed']:5} {row['missed']:5} "
            f"{row['lost_words']:5} {row['table_lines']:5} {row['furniture_headings_before']:4} {row['furniture_headings_after']:4}"
        )
    print("label: labelled furniture lines; remov: removed; miss: labelled but kept; lostW: real-text words removed;")
    print("table: table-row lines; hdgB/hdgA: chunks headed by a furniture line, removal off / on")


if __name__ == "__main__":
    main()
