"""Evaluation over a table of triplets: JSONL, CSV or Parquet in, the same formats out.

Column names of RAGAS datasets and DeepEval test cases are accepted beside the project's own. A row
that cannot be scored (a JSONL line that is not a JSON object or gives a key twice, no question, contexts
that are not a list, a text field that is not text (a list, a mapping, bytes, a boolean, or null in a list
of contexts; a number is read as text), or one over MAX_FIELD_CHARS) is reported with its line (JSONL),
item (JSON) or row number and kept in the output with status 'invalid'; the other rows are scored. A CSV
that names a column twice is refused whole. Rows are told apart by position, never by `id`. A lone
surrogate that JSON let in ("\\ud800") is read as U+FFFD (core.text.scorable_text), so its row is scored.
"""

from __future__ import annotations

import numbers
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.cells import list_cell, read_text_csv
from rag_eval_pipeline.core.files import check_writable, write_atomically
from rag_eval_pipeline.core.jsonl import iter_json_lines, read_json_array
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import OK
from rag_eval_pipeline.core.text import field_text, scorable_text
from rag_eval_pipeline.evaluation.scoring import metric_rows

ALIASES = {
    "user_input": "question",
    "retrieved_contexts": "contexts",
    "response": "answer",
    "reference": "ground_truth",
    "retrieved_context_ids": "context_ids",
    "reference_context_ids": "gold_chunk_ids",
    # DeepEval's test cases and goldens (a .json array)
    "input": "question",
    "actual_output": "answer",
    "retrieval_context": "contexts",
    "expected_output": "ground_truth",
}
FORMATS = (".jsonl", ".csv", ".parquet")
# DeepEval's free-form object, where our own fields ride in its files (synthesis/interop.py writes them):
# ours -> its key there, lifted out where the row lacks ours.
METADATA = "additional_metadata"
METADATA_FIELDS = {"id": "qa_id", "context_ids": "retrieved_context_ids", "gold_chunk_ids": "gold_chunk_ids"}


@dataclass(frozen=True)
class InputRow:
    number: int  # 1-based: the line of a .jsonl file, the data row of a .csv or .parquet file
    unit: str  # "line" or "row"
    record: dict = field(default_factory=dict)  # the row's fields, RAGAS names renamed to ours
    problem: str = ""  # why the row could not be read at all

    @property
    def where(self) -> str:
        return f"{self.unit} {self.number}"

    @property
    def row_id(self) -> str:
        """The `id` column, or the row's number when it has none."""
        value = self.record.get("id")
        return _id(value).strip() if _present(value) else str(self.number)


@dataclass(frozen=True)
class BadRow:
    row_number: int  # the InputRow's number
    row_id: str
    reason: str
    unit: str = "row"

    @property
    def where(self) -> str:
        return f"{self.unit} {self.row_number}"


def read_rows(path: Path) -> list[InputRow]:
    """Every row of the file in order; a JSONL line (or an item of a .json array) that is not a JSON object,
    or gives a key twice, is kept with its problem. A .json file is DeepEval's test cases or goldens: an array
    of objects, our own fields read from their additional_metadata too. ValueError (one line) for a file
    that cannot be read at all."""
    path = Path(path)
    deepeval = path.suffix.lower() == ".json"
    if not deepeval:
        check_format(path, "input")
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist")
    if deepeval:
        return [
            InputRow(item.number, "item", _renamed(_deepeval_record(item.record or {})), item.problem)
            for item in read_json_array(path)
        ]
    if path.suffix.lower() == ".jsonl":
        # utf-8-sig: a byte-order mark from a Windows editor is not a broken first line.
        return [
            InputRow(line.number, "line", _renamed(line.record or {}), line.problem)
            for line in iter_json_lines(path, encoding="utf-8-sig", unique_keys=True)
        ]
    if path.suffix.lower() == ".csv":
        return rows_from_frame(read_text_csv(path))  # ValueError in one line; none for an empty file
    try:
        return rows_from_frame(pd.read_parquet(path))
    except ValueError as error:  # pyarrow's parse errors; the first line says what is wrong
        raise ValueError(f"input {path} cannot be read: {str(error).strip().splitlines()[0]}") from None


def _deepeval_record(record: dict) -> dict:
    """A DeepEval object with our own fields lifted out of its additional_metadata where the row lacks them:
    `id` (from qa_id), `context_ids` (the retrieved contexts' ids) and `gold_chunk_ids`."""
    metadata = record.get(METADATA)
    if not isinstance(metadata, dict):
        return record
    extra = {
        ours: metadata[theirs] for ours, theirs in METADATA_FIELDS.items() if theirs in metadata and ours not in record
    }
    return {**record, **extra}


def rows_from_frame(frame: pd.DataFrame) -> list[InputRow]:
    return rows_from_records(frame.to_dict("records"))


def rows_from_records(records) -> list[InputRow]:
    """Rows from mappings (a list of dicts, a DataFrame's records), numbered from 1; a record that is not a
    mapping is kept with its problem."""
    return [
        InputRow(number, "row", _renamed(dict(record)))
        if isinstance(record, Mapping)
        else InputRow(number, "row", problem=f"not a mapping of column names to values: {type(record).__name__}")
        for number, record in enumerate(records, start=1)
    ]


def _renamed(record: dict) -> dict:
    """RAGAS column names as ours, unless the row already has ours."""
    return {
        (ALIASES[key] if key in ALIASES and ALIASES[key] not in record else key): value for key, value in record.items()
    }


def check_format(path: Path, what: str) -> None:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{what} {path}: unsupported format {suffix!r}; use one of {', '.join(FORMATS)}")


def check_output_path(path: Path) -> None:
    """Refuse an output that could not be written, before any scoring is spent on it."""
    check_format(Path(path), "output")
    check_writable(path)


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Written then renamed: a run that fails while writing leaves no half-written table."""
    path = Path(path)
    suffix = path.suffix.lower()
    writers = {
        ".jsonl": lambda partial: frame.to_json(partial, orient="records", lines=True, force_ascii=False),
        ".csv": lambda partial: frame.to_csv(partial, index=False),
        ".parquet": lambda partial: frame.to_parquet(partial, index=False),
    }
    if suffix not in writers:
        raise ValueError(f"output {path}: unsupported format {suffix!r}; use one of {', '.join(FORMATS)}")
    write_atomically(path, writers[suffix])


def to_items(rows: list[InputRow]) -> tuple[list[tuple[int, EvalItem]], list[BadRow]]:
    """(row number, item) for every valid row, and the rows that cannot be scored with the reason."""
    items, bad = [], []
    for row in rows:
        try:
            if row.problem:
                raise ValueError(row.problem)
            items.append((row.number, _item(row.record, row.row_id)))
        except ValueError as error:
            bad.append(BadRow(row.number, row.row_id, str(error), row.unit))
    return items, bad


def duplicate_ids(rows: list[InputRow]) -> dict[str, list[str]]:
    """{id: where it occurs} for every `id` value that more than one row carries."""
    places = defaultdict(list)
    for row in rows:
        if _present(row.record.get("id")):
            places[row.row_id].append(row.where)
    return {row_id: where for row_id, where in places.items() if len(where) > 1}


def _item(row: dict, row_id: str) -> EvalItem:
    question = _text(row.get("question"), "question")
    if not question:
        raise ValueError("missing question")
    texts = _list(row.get("contexts"), "contexts")
    ids = _list(row.get("context_ids"), "context ids") if _present(row.get("context_ids")) else None
    if ids is not None and len(ids) != len(texts):
        raise ValueError(f"{len(ids)} context ids for {len(texts)} contexts")
    contexts = []
    for rank, context in enumerate(texts):
        what = f"context {rank + 1}"
        if isinstance(context, dict):  # {"id": ..., "text": ...}
            chunk_id = _id(context["id"], f"context id {rank + 1}") if "id" in context else str(rank)
            contexts.append({"id": chunk_id, "text": _text(context.get("text"), what, required=True)})
        else:
            chunk_id = _id(ids[rank], f"context id {rank + 1}") if ids else f"context-{rank + 1}"
            contexts.append({"id": chunk_id, "text": _text(context, what, required=True)})
    gold = _list(row.get("gold_chunk_ids"), "reference context ids") if _present(row.get("gold_chunk_ids")) else []
    return EvalItem(
        qa_id=row_id,
        question=question,
        answer=_text(row.get("answer"), "answer"),
        contexts=contexts,
        ground_truth=_text(row.get("ground_truth"), "ground truth"),
        gold_chunk_ids=[_id(g, f"reference context id {n}") for n, g in enumerate(gold, start=1)],
    )


def _present(value) -> bool:
    return not _absent(value) and not (isinstance(value, str) and not value.strip())


def _absent(value) -> bool:
    """None, or a missing value of a table (NaN, pd.NA, NaT): a field left out, not a text."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _text(value, what: str, required: bool = False) -> str:
    """The field's text: a text, or a number written as text (a CSV or Parquet column of numbers); "" when
    absent, unless `required` (a context in a list: null there is no context). ValueError for anything else:
    str() would score ["a", "b"] as the text "['a', 'b']"."""
    if _absent(value) and not required:
        return ""
    return field_text(_as_text(value, what).strip(), what)


def _as_text(value, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_)) and not _absent(value):
        return str(value)
    raise ValueError(f"{what} is not text: {_kind(value)}")


def _kind(value) -> str:
    """What a value that is not text is, in the words of JSON and tables."""
    if _absent(value):
        return "null"
    kinds = (
        ((bool, np.bool_), "a boolean"),
        ((list, tuple, np.ndarray), "a list"),
        ((Mapping,), "a mapping"),
        ((bytes, bytearray, memoryview), "bytes"),
    )
    return next((name for types, name in kinds if isinstance(value, types)), f"a {type(value).__name__}")


def _id(value, what: str | None = None) -> str:
    """An id as text; with `what`, one that is not text or a number is refused (ValueError) and not made up."""
    return scorable_text(_as_text(value, what) if what is not None else str(value))


def _list(value, what: str) -> list:
    """A list from a list, a numpy array (Parquet) or a list written in a CSV cell: JSON, or Python's repr of
    a list as RAGAS's to_csv writes it (read as a literal, never run)."""
    if not _present(value):
        return []
    if isinstance(value, str):
        return list_cell(value, what)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def results_frame(rows: list[InputRow], items, results, bad_rows: list[BadRow], metrics) -> pd.DataFrame:
    """One row per input row, in input order: id, a column per metric, `<metric>_status` and `error`."""
    scored = {number: item_results for (number, _), item_results in zip(items, results)}
    cells = {
        (cell["row"], cell["metric"]): cell
        for cell in metric_rows(({"row": row.number}, scored.get(row.number, [])) for row in rows)
    }
    invalid = {bad.row_number: bad.reason for bad in bad_rows}
    columns = ["id", *(name for metric in metrics for name in (metric, f"{metric}_status")), "error"]
    out_rows = []
    for row in rows:
        out: dict[str, object] = {"id": row.row_id}
        for metric in metrics:
            cell = cells.get((row.number, metric))  # none: the row could not be scored at all
            out[metric] = cell["score"] if cell else None
            out[f"{metric}_status"] = _status(cell) if cell else "invalid"
        out["error"] = invalid.get(row.number, "")
        out_rows.append(out)
    return pd.DataFrame(out_rows, columns=columns).astype({metric: "Float64" for metric in metrics})


def _status(cell: dict) -> str:
    return cell["status"] if cell["status"] == OK else f"unmeasured: {cell['reason']}"


def summary_table(output: pd.DataFrame, metrics) -> str:
    width = max([22, *(len(metric) + 2 for metric in metrics)])  # a metric of a team's own may be a long path
    lines = [f"{'metric':<{width}}{'mean':>8}  measured", "-" * (width + 20)]
    for metric in metrics:
        measured = output.loc[output[f"{metric}_status"] == OK, metric]
        mean = f"{float(measured.mean()):.3f}" if len(measured) else "n/a"
        lines.append(f"{metric:<{width}}{mean:>8}  {len(measured)}/{len(output)}")
    return "\n".join(lines)
