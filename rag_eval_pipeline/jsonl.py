"""JSON Lines input: one object per line, with the line number in every error."""

from __future__ import annotations

import json
from pathlib import Path


def read_json_lines(path: Path, encoding: str = "utf-8") -> list[dict]:
    """The objects of a .jsonl file, blank lines skipped; ValueError names the file and line of a bad one."""
    records = []
    for number, line in enumerate(Path(path).read_text(encoding=encoding).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} line {number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number}: expected a JSON object per line")
        records.append(record)
    return records
