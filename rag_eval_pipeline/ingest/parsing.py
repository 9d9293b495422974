"""Read a tenant's document folder into plain records; unreadable files become rejections.

A bad file never stops ingestion: it is recorded with the reason a person can act on
(encrypted, corrupt, empty, image-only, wrong encoding, binary, unsupported type).

Documents are confined to the folder. Symbolic links inside it are never followed but rejected with
their reason: one pointing out would let a tenant's documents read any file on the host, or another
tenant's; one pointing in would only read its target twice (or loop). Hard links are rejected too: a
file with a second name may be any file of the same file system, and nothing tells which name is its
own. A folder named by path may be a link (an operator's mount); it is resolved once and every read
stays below it. A tenant's folder under the documents root may not be one (tenant_folder_problem).
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from rag_eval_pipeline.ingest.furniture import is_furniture_text, strip_furniture

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
    furniture_lines: int = 0  # running headers, footers and page numbers removed from the pages

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
    listing = list_folder(folder)
    result = IngestResult(rejections=list(listing.rejections))
    for relative, path in listing.files:
        try:
            doc_format = _format_of(path)
            result.documents.append(_parse(read_inside(listing.root, relative), relative, doc_format, path.stem))
        except UnreadableDocument as error:
            result.rejections.append(Rejection(path=relative, reason=str(error)))
    result.rejections.sort(key=lambda r: r.path.split("/"))
    return result


def read_document(path: Path, relative: str) -> Document:
    path = Path(path)
    doc_format = _format_of(path)
    return _parse(read_inside(path.parent.resolve(), path.name), relative, doc_format, path.stem)


# --- listing: what is in the folder, confined to it ------------------------------------------------


@dataclass
class FolderListing:
    root: Path  # the folder, resolved
    files: list[tuple[str, Path]] = field(default_factory=list)  # (relative path, path) of regular files
    rejections: list[Rejection] = field(default_factory=list)


def list_folder(folder: Path) -> FolderListing:
    """Every non-hidden regular file below folder, without following links; links and special files are rejections."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"document folder {folder} does not exist")
    listing = FolderListing(root=folder.resolve())
    pending = [listing.root]
    while pending:  # a loop, not recursion: a hostile tree may be deeper than Python's stack
        directory = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError as error:
            listing.rejections.append(
                Rejection(_relative(listing.root, directory), f"cannot list folder: {error.strerror}")
            )
            continue
        for entry in entries:
            _sort_entry(listing, entry, pending)
    listing.files.sort(key=lambda item: item[0].split("/"))
    return listing


def _sort_entry(listing: FolderListing, entry: os.DirEntry, pending: list[Path]) -> None:
    if entry.name.startswith("."):
        return  # hidden files and folders (.git, .DS_Store, editors' temporary files) are not documents
    path = Path(entry.path)
    relative = _relative(listing.root, path)
    if entry.is_symlink():
        listing.rejections.append(Rejection(relative, _link_reason(listing.root, path)))
    elif entry.is_dir(follow_symlinks=False):
        pending.append(path)
    elif entry.is_file(follow_symlinks=False):
        try:
            names = entry.stat(follow_symlinks=False).st_nlink
        except OSError as error:  # removed since the folder was listed
            listing.rejections.append(Rejection(relative, f"cannot read file: {error.strerror}"))
            return
        if names > 1:
            listing.rejections.append(Rejection(relative, _hard_link_reason(names)))
        else:
            listing.files.append((relative, path))
    else:  # reading a named pipe would wait forever for a writer
        listing.rejections.append(Rejection(relative, "not a regular file (a named pipe, socket or device)"))


def _link_reason(root: Path, link: Path) -> str:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # a missing target, or links that loop
        return "broken symbolic link: links are not followed"
    if not target.is_relative_to(root):
        return "symbolic link pointing outside the document folder: links are not followed"
    inside = _relative(root, target)
    return f"symbolic link to {inside}: links are not followed (the target is read under its own name)"


def _hard_link_reason(names: int) -> str:
    return (
        f"hard link (one of {names} names of this file): not read, as its content may be another tenant's "
        "file or a host file; put a copy of its own in the folder"
    )


def _relative(root: Path, path: Path) -> str:
    return Path(path).relative_to(root).as_posix()


def tenant_folder_problem(folder: Path) -> str:
    """Why a folder found under the documents root cannot be read as a tenant's, or '' when it can.

    Its documents become that tenant's golden set: a symbolic link would hand it another tenant's
    folder, or any folder of the host. The documents root itself may be a link (an operator's mount).
    """
    if Path(folder).is_symlink():
        return (
            "a symbolic link: a tenant's documents must be in a folder of its own under the documents root "
            "(the root itself may be a link)"
        )
    return ""


def read_inside(root: Path, relative: str) -> bytes:
    """The bytes of root/relative, opened one component at a time without following links.

    A folder or file swapped for a symbolic or hard link after the listing cannot lead the read outside
    root: what is checked is the file opened, not the name listed.
    """
    try:
        return _read_regular(_open_below(root, relative))
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnreadableDocument("symbolic link: links are not followed") from None
        raise UnreadableDocument(f"cannot read file: {error.strerror}") from None


def _open_below(root: Path, relative: str) -> int:
    *folders, name = relative.split("/")
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folders:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            os.close(directory)
            directory = inner
        # O_NONBLOCK: a pipe swapped in after the listing must not block the open.
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    finally:
        os.close(directory)


def _read_regular(descriptor: int) -> bytes:
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableDocument("not a regular file (a named pipe, socket or device)")
        if status.st_nlink > 1:
            raise UnreadableDocument(_hard_link_reason(status.st_nlink))
        return file.read()


# --- parsing ------------------------------------------------------------------------------------------


def _format_of(path: Path) -> str:
    doc_format = SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if doc_format is None:
        raise UnreadableDocument(f"unsupported file type {path.suffix or '(none)'!r}")
    return doc_format


def _parse(raw: bytes, relative: str, doc_format: str, stem: str) -> Document:
    if not raw.strip():
        raise UnreadableDocument("empty file")
    furniture_lines = 0
    if doc_format == "pdf":
        pages, title = _read_pdf(raw)
        pages, furniture_lines = _without_furniture(pages)
    else:
        pages, title = _read_text(raw), None
    if not any(page.strip() for page in pages):
        raise UnreadableDocument("no extractable text")
    return Document(
        doc_id=doc_id_for(relative),
        path=relative,
        format=doc_format,
        title=title or _first_heading(pages) or stem,  # from the cleaned pages: a running header is no title
        pages=pages,
        content_hash=hashlib.sha256(raw).hexdigest(),
        furniture_lines=furniture_lines,
    )


def _without_furniture(pages: list[str]) -> tuple[list[str], int]:
    """PDF pages without running headers, footers and page numbers, and how many lines went."""
    try:
        cleaned = strip_furniture(pages)
    except Exception:  # cleaning is a refinement: a fault in it must not cost the document
        logging.getLogger(__name__).warning("page furniture not removed: the detector failed", exc_info=True)
        return pages, 0
    if not any(page.strip() for page in cleaned.pages):
        return pages, 0  # pages of nothing but repeated lines: those lines are the document's text
    return cleaned.pages, len(cleaned.removed)


def _read_text(raw: bytes) -> list[str]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnreadableDocument(f"not valid UTF-8 text ({error.reason} at byte {error.start})") from None
    if "\x00" in text:  # UTF-16 without a byte-order mark decodes as UTF-8, NULs and all
        raise UnreadableDocument("binary content (NUL bytes), not UTF-8 text; UTF-16 text must be saved as UTF-8")
    return [text]


def _read_pdf(raw: bytes) -> tuple[list[str], str | None]:
    # Imported here: every process that loads the code location (a gate reads no PDF) would pay for it.
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(raw))  # the bytes already read: what is parsed is what is hashed
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
    """The first line of the first page that reads as a title; failing that, its first line of text."""
    lines = [stripped for line in pages[0].splitlines() if (stripped := line.strip().lstrip("#").strip())]
    lines = [line for line in lines if not is_furniture_text(line)]  # a page number or a date alone is no title
    title = next((line for line in lines[:10] if _reads_as_title(line)), lines[0] if lines else None)
    return title[:200] if title else None


def _reads_as_title(line: str) -> bool:
    """Short, with letters, not a sentence or a dateline ("{from} THE SUN, SUNDAY, MARCH 25, 1877.")."""
    return (
        len(line.split()) <= 15
        and any(c.isalpha() for c in line)
        and line[-1] not in ".,;:"
        and not re.search(r"[{}\[\]]", line)
    )
