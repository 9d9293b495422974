"""Read a tenant's document folder into plain records; unreadable files become rejections.

A bad file never stops ingestion: it is recorded with the reason a person can act on
(encrypted, corrupt, empty, image-only, wrong encoding, unsupported type).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import PdfReadError

SUPPORTED_SUFFIXES = {".pdf": "pdf", ".md": "markdown", ".markdown": "markdown", ".txt": "text"}

# pypdf warns loudly on slightly malformed but readable PDFs; those warnings are not rejections.
logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Document:
    doc_id: str
    path: str
    format: str
    title: str
    pages: list[str]
    content_hash: str

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages)


@dataclass(frozen=True)
class Rejection:
    path: str
    reason: str


@dataclass
class IngestResult:
    documents: list[Document] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


class UnreadableDocument(Exception):
    """Raised by a reader with the reason the file is rejected."""


def doc_id_for(relative_path: str) -> str:
    """The file's path inside the tenant folder, so adding other files never changes it.

    Only '%' and '#' are escaped ('#' separates the chunk number in chunk ids): two distinct paths
    never share an id, whatever their case or spaces.
    """
    return relative_path.replace("%", "%25").replace("#", "%23")


def read_documents(folder: Path) -> IngestResult:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"document folder {folder} does not exist")
    result = IngestResult()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in relative.split("/")):
            continue  # hidden files and folders (.git, .DS_Store) are not documents
        try:
            result.documents.append(read_document(path, relative))
        except UnreadableDocument as error:
            result.rejections.append(Rejection(path=relative, reason=str(error)))
    return result


def read_document(path: Path, relative: str) -> Document:
    doc_format = SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if doc_format is None:
        raise UnreadableDocument(f"unsupported file type {path.suffix or '(none)'!r}")
    raw = path.read_bytes()
    if not raw.strip():
        raise UnreadableDocument("empty file")
    if doc_format == "pdf":
        pages, title = _read_pdf(path)
    else:
        pages, title = _read_text(raw), None
    if not any(page.strip() for page in pages):
        raise UnreadableDocument("no extractable text")
    return Document(
        doc_id=doc_id_for(relative),
        path=relative,
        format=doc_format,
        title=title or _first_heading(pages) or path.stem,
        pages=pages,
        content_hash=hashlib.sha256(raw).hexdigest(),
    )


def _read_text(raw: bytes) -> list[str]:
    try:
        return [raw.decode("utf-8-sig")]
    except UnicodeDecodeError as error:
        raise UnreadableDocument(f"not valid UTF-8 text ({error.reason} at byte {error.start})") from None


def _read_pdf(path: Path) -> tuple[list[str], str | None]:
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("encrypted PDF: a password is required")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = (reader.metadata or {}).get("/Title") if reader.metadata else None
    except UnreadableDocument:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as error:
        raise UnreadableDocument(f"corrupt or unreadable PDF: {error}") from None
    except Exception as error:  # pypdf raises a wide range of errors on damaged files
        if "decrypt" in str(error).lower() or "password" in str(error).lower():
            raise UnreadableDocument("encrypted PDF: a password is required") from None
        raise UnreadableDocument(f"corrupt or unreadable PDF: {type(error).__name__}: {error}") from None
    if not pages:
        raise UnreadableDocument("PDF has no pages")
    if not any(page.strip() for page in pages):
        raise UnreadableDocument("no extractable text: image-only or scanned PDF (OCR is not supported)")
    return pages, (str(title).strip() or None) if title else None


def _first_heading(pages: list[str]) -> str | None:
    for line in pages[0].splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return None
