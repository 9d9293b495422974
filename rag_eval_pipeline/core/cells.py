"""Table cells read back as values: a CSV file with every cell as text, and a list written in one text cell.

`read_text_csv` refuses a file that names a column twice (pandas would rename the second `name.1`, which no
reader looks for, and one of two values would be dropped without a word). `list_cell` reads a list cell as
JSON, or as Python's repr of a list (what RAGAS's `to_csv` writes) with `ast.literal_eval`, and only from a
cell that starts with `[`: nothing in a cell is ever run. Used by `rag-eval evaluate` (evaluation/tabular.py)
and `rag-eval dataset import` (synthesis/interop.py).
"""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pandas as pd


def read_text_csv(path: Path | str) -> pd.DataFrame:
    """Every cell as text (an empty cell is ""), a byte-order mark skipped; an empty file is an empty frame.
    ValueError in one line naming the file when it is not UTF-8, cannot be read as CSV, or names a column
    twice (blank names aside: a spreadsheet's trailing empty columns)."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
        twice = _named_twice(header)
        if twice is not None:
            raise _NamedTwice(f"{path} names the column {twice!r} twice: a reader would see only one of them")
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except _NamedTwice:
        raise
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except (csv.Error, pd.errors.ParserError, ValueError) as error:
        raise ValueError(f"{path} cannot be read as CSV: {_first_line(error)}") from None


class _NamedTwice(ValueError):
    pass


def _named_twice(header: list[str]) -> str | None:
    seen: set[str] = set()
    for name in header:
        if name in seen and name.strip():
            return name
        seen.add(name)
    return None


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def list_cell(text: str, what: str) -> list:
    """A list written in a text cell: JSON, or Python's repr of a list as RAGAS's CSV holds it. The latter is
    read by ast.literal_eval, and only from a cell that starts with '[': nothing in a cell is ever run."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        value = _python_list(text, what)
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def _python_list(text: str, what: str) -> list:
    problem = ValueError(f"{what} is not a list (a cell must hold a JSON list or a Python list literal)")
    if not text.lstrip().startswith("["):
        raise problem
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise problem from None
    if not isinstance(value, list):
        raise problem
    return value
