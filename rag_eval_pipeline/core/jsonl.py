"""JSON Lines input: one object per line, with the line number in every error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JsonLine:
    number: int  # 1-based line of the file
    record: dict | None  # None when the line is not a JSON object
    problem: str = ""  # why it is not


def iter_json_lines(path: Path, encoding: str = "utf-8") -> Iterator[JsonLine]:
    """Every non-blank line, parsed or with the reason it could not be; never raises for bad content."""
    # bytes.splitlines breaks only at \n and \r: str.splitlines would also break inside a JSON
    # string at U+2028 or U+0085, which json.dumps(ensure_ascii=False) writes raw.
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), start=1):
        line = _parse(number, raw, encoding)
        if line is not None:
            yield line


def _parse(number: int, raw: bytes, encoding: str) -> JsonLine | None:
    """The line's object or problem; None for a blank line."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        return JsonLine(number, None, f"not {encoding} text ({error.reason} at byte {error.start})")
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        return JsonLine(number, None, f"not valid JSON ({error.msg})")
    except RecursionError:
        return JsonLine(number, None, "not valid JSON (nested too deeply)")
    if not isinstance(record, dict):
        return JsonLine(number, None, f"expected a JSON object, got a JSON {_json_type(record)}")
    return JsonLine(number, record)


def _json_type(value) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_json_lines(path: Path, encoding: str = "utf-8") -> list[dict]:
    """The objects of a .jsonl file, blank lines skipped; ValueError names the file and line of a bad one."""
    records = []
    for line in iter_json_lines(path, encoding):
        if line.record is None:
            raise ValueError(f"{path} line {line.number}: {line.problem}")
        records.append(line.record)
    return records
