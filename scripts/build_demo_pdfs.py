"""Render data/pdf_sources/*.md into text-based PDFs in the demo tenant folder.

The demo corpus needs real PDFs, but third-party PDFs bring licensing and provenance
questions and cannot be checked against a known source text. So we write the text
ourselves and generate the PDFs from it: every sentence in a PDF is known, which lets
tests and the QA generator be verified against the Markdown source.

Output is byte-for-byte deterministic: the creation date is fixed, and fpdf2 derives
the file /ID from the content and that date. Only core fonts are used, so the source
text must be latin-1 (plain ASCII punctuation in practice).

Usage: python scripts/build_demo_pdfs.py
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "data" / "pdf_sources"
OUTPUT = ROOT / "data" / "tenants" / "demo"
FIXED_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
HEADING_SIZES = {1: 18, 2: 14, 3: 12}
BODY_SIZE = 11


def parse_blocks(text: str) -> list[tuple[int, str]]:
    """Split Markdown into (heading level, text) blocks; level 0 is a paragraph."""
    blocks = []
    for chunk in text.split("\n\n"):
        chunk = chunk.strip()
        if not chunk:
            continue
        if chunk.startswith("#"):
            marks, _, title = chunk.partition(" ")
            blocks.append((len(marks), title.strip()))
        else:
            blocks.append((0, " ".join(line.strip() for line in chunk.splitlines())))
    return blocks


def render(source: Path, target: Path) -> int:
    """Write one PDF and return its page count."""
    blocks = parse_blocks(source.read_text(encoding="utf-8"))
    title = next((text for level, text in blocks if level == 1), source.stem)
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_author("Halcyon Freight (fictional demo corpus)")
    pdf.set_margins(25, 25, 25)
    pdf.set_auto_page_break(auto=True, margin=25)
    pdf.add_page()
    for level, text in blocks:
        if level:
            pdf.ln(4)
            size = HEADING_SIZES.get(level, 12)
            pdf.set_font("Helvetica", "B", size)
            pdf.multi_cell(0, size * 0.5, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        else:
            pdf.set_font("Helvetica", "", BODY_SIZE)
            pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(target))
    return pdf.page_no()


def main() -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for source in sorted(SOURCES.glob("*.md")):
        target = OUTPUT / f"{source.stem}.pdf"
        pages = render(source, target)
        print(f"{target.relative_to(ROOT)}: {pages} pages")


if __name__ == "__main__":
    main()
