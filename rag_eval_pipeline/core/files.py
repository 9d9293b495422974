"""Write then rename: a reader, or a run that crashed half way, never sees a half-written file."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def write_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """`write` fills a partial file beside `path`, which then replaces `path` in one rename.

    The partial file has a hidden name of this writer's own, so two concurrent writers never share
    one; it is removed when `write` fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
    try:
        write(partial)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"))


def create_text_once(path: Path, text: str) -> bool:
    """Write a new file whole, unless `path` exists already: True when this call created it.

    The text is written to a partial file first and then hard-linked to `path`, which fails when another
    writer got there first: a compare-and-set that never shows a half-written file and never replaces one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.link(partial, path)
        return True
    except FileExistsError:
        return False
    finally:
        partial.unlink(missing_ok=True)


def atomic_write_parquet(path: Path, frame: pd.DataFrame) -> Path:
    return write_atomically(path, lambda partial: frame.to_parquet(partial, index=False))


def atomic_copy(source: Path, path: Path) -> Path:
    return write_atomically(path, lambda partial: shutil.copyfile(source, partial))


def check_writable(path: Path) -> None:
    """Refuse a file that could not be written (a folder, under a file, in a read-only folder)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"output {path} is a folder")
    folder = path.parent
    while not folder.exists():  # the folders still missing are created when the output is written
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"output {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"output {path}: folder {folder} is not writable")
