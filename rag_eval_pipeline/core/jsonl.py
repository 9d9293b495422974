"""JSON input: JSON Lines (one object a line) and a JSON array of objects, with the line or item in every error.

A key given twice in one object is a problem when the reader asks for unique keys: `json.loads` keeps the
last of the two without a word, which would read one of two answers and drop the other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JsonLine:
    number: int  # 1-based line of the file (or place in a JSON array)
    record: dict | None  # None when the line is not a JSON object
    problem: str = ""  # why it is not


class NotAnArray(ValueError):
    """A .json file that holds something other than an array."""


def iter_json_lines(path: Path, encoding: str = "utf-8", *, unique_keys: bool = False) -> Iterator[JsonLine]:
    """Every non-blank line, parsed or with the reason it could not be; never raises for bad content.
    With `unique_keys`, an object (at any depth) that gives a key twice makes its line a problem."""
    # bytes.splitlines breaks only at \n and \r: str.splitlines would also break inside a JSON
    # string at U+2028 or U+0085, which json.dumps(ensure_ascii=False) writes raw.
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), start=1):
        line = _parse(number, raw, encoding, unique_keys)
        if line is not None:
            yield line


def _parse(number: int, raw: bytes, encoding: str, unique_keys: bool) -> JsonLine | None:
    """The line's object or problem; None for a blank line."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        return JsonLine(number, None, f"not {encoding} text ({error.reason} at byte {error.start})")
    if not text.strip():
        return None
    repeated: list[str] = []
    try:
        record = json.loads(text, object_pairs_hook=_pairs_hook(repeated)) if unique_keys else json.loads(text)
    except json.JSONDecodeError as error:
        return JsonLine(number, None, f"not valid JSON ({error.msg})")
    except RecursionError:
        return JsonLine(number, None, "not valid JSON (nested too deeply)")
    if not isinstance(record, dict):
        return JsonLine(number, None, f"expected a JSON object, got a JSON {_json_type(record)}")
    if repeated:
        return JsonLine(number, None, f"duplicate key {repeated[0]!r}")
    return JsonLine(number, record)


def read_json_array(path: Path | str) -> list[JsonLine]:
    """The items of a .json file holding one array (DeepEval's goldens or test cases), each an object or the
    reason it is not (JsonLine.number is its place in the array, from 1): not an object, or an object that
    gives a key twice (at any depth). ValueError when the file is not JSON, NotAnArray when it holds no array."""
    path = Path(path)
    repeated: list[str] = []
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"), object_pairs_hook=_pairs_hook(repeated))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path} is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None
    except RecursionError:
        raise ValueError(f"{path} is not valid JSON (nested too deeply)") from None
    if not isinstance(value, list):
        raise NotAnArray(f"{path} holds a JSON {_json_type(value)}, not an array of objects")
    return [_item(n, item, check=bool(repeated)) for n, item in enumerate(value, start=1)]


def _item(number: int, item: object, check: bool) -> JsonLine:
    if not isinstance(item, dict):
        return JsonLine(number, None, f"expected a JSON object, got a JSON {_json_type(item)}")
    key = _repeated_key(item) if check else None  # walked only when the file gives some key twice
    return JsonLine(number, None, f"duplicate key {key!r}") if key is not None else JsonLine(number, item)


class _Repeated(dict):
    """A JSON object that gave a key twice (the dict keeps the last value): which key, for the problem."""

    def __init__(self, pairs: list[tuple[str, object]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _pairs_hook(repeated: list[str]):
    """json.loads's object_pairs_hook: the object as a dict, marked (and its key added to `repeated`) when
    it gives a key twice."""

    def hook(pairs: list[tuple[str, object]]) -> dict:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                repeated.append(key)
                return _Repeated(pairs, key)
            seen.add(key)
        return dict(pairs)

    return hook


def _repeated_key(value: object) -> str | None:
    """The first key given twice in the value, an object or one inside it (depth first, without recursion:
    JSON nests as deep as json.loads allows)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, _Repeated):
            return current.key
        if isinstance(current, dict):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))
    return None


def _json_type(value) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))
    if value is None:
        return "null"
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def read_json_lines(path: Path, encoding: str = "utf-8") -> list[dict]:
    """The objects of a .jsonl file, blank lines skipped; ValueError names the file and line of a bad one."""
    records = []
    for line in iter_json_lines(path, encoding):
        if line.record is None:
            raise ValueError(f"{path} line {line.number}: {line.problem}")
        records.append(line.record)
    return records
