"""Evaluation over a table of triplets: JSONL, CSV or Parquet in, the same formats out.

Column names of RAGAS datasets are accepted beside the project's own. A row that cannot be scored
(no question, contexts that are not a list) is reported with its row number and kept in the output
with status 'invalid'; the other rows are scored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rag_eval_pipeline.evaluation.metrics import EvalItem

ALIASES = {
    "user_input": "question",
    "retrieved_contexts": "contexts",
    "response": "answer",
    "reference": "ground_truth",
    "retrieved_context_ids": "context_ids",
    "reference_context_ids": "gold_chunk_ids",
}
FORMATS = (".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class BadRow:
    row_number: int  # 1-based, as a person counts the data rows of the file
    row_id: str
    reason: str


def read_table(path: Path) -> pd.DataFrame:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: unsupported format {suffix!r}; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist")
    if suffix == ".jsonl":
        frame = pd.read_json(path, lines=True, dtype=False)
    elif suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        frame = pd.read_parquet(path)
    return frame.rename(columns={k: v for k, v in ALIASES.items() if k in frame.columns and v not in frame.columns})


def write_table(frame: pd.DataFrame, path: Path) -> None:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise ValueError(f"{path}: unsupported output format {suffix!r}; use one of {', '.join(FORMATS)}")


def to_items(frame: pd.DataFrame) -> tuple[list[tuple[str, EvalItem]], list[BadRow]]:
    """(row id, item) for every valid row, and the rows that cannot be scored with the reason."""
    items, bad = [], []
    for number, row in enumerate(frame.to_dict("records"), start=1):
        row_id = str(row.get("id", number))
        try:
            items.append((row_id, _item(row, row_id)))
        except ValueError as error:
            bad.append(BadRow(number, row_id, str(error)))
    return items, bad


def _item(row: dict, row_id: str) -> EvalItem:
    question = _text(row.get("question"))
    if not question:
        raise ValueError("missing question")
    texts = _list(row.get("contexts"), "contexts")
    ids = _list(row.get("context_ids"), "context ids") if _present(row.get("context_ids")) else None
    if ids is not None and len(ids) != len(texts):
        raise ValueError(f"{len(ids)} context ids for {len(texts)} contexts")
    contexts = []
    for rank, context in enumerate(texts):
        if isinstance(context, dict):
            contexts.append({"id": str(context.get("id", rank)), "text": str(context.get("text", ""))})
        else:
            contexts.append({"id": str(ids[rank]) if ids else f"context-{rank + 1}", "text": str(context)})
    gold = _list(row.get("gold_chunk_ids"), "reference context ids") if _present(row.get("gold_chunk_ids")) else []
    return EvalItem(
        qa_id=row_id, question=question, answer=_text(row.get("answer")), contexts=contexts,
        ground_truth=_text(row.get("ground_truth")), gold_chunk_ids=[str(g) for g in gold],
    )


def _present(value) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and pd.isna(value):
        return False
    return not (isinstance(value, str) and not value.strip())


def _text(value) -> str:
    return str(value).strip() if _present(value) else ""


def _list(value, what: str) -> list:
    """A list from a list, a numpy array (Parquet) or a JSON-encoded list (CSV)."""
    if not _present(value):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{what} is not a list (a CSV cell must hold a JSON list)") from None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def results_frame(frame: pd.DataFrame, items, results, bad_rows: list[BadRow], metrics) -> pd.DataFrame:
    """One row per input row, in input order: id, a column per metric and `<metric>_status`."""
    scored = {row_id: item_results for (row_id, _), item_results in zip(items, results)}
    invalid = {bad.row_id: bad.reason for bad in bad_rows}
    rows = []
    for number, row in enumerate(frame.to_dict("records"), start=1):
        row_id = str(row.get("id", number))
        out = {"id": row_id}
        for metric in metrics:
            out[metric] = None
            out[f"{metric}_status"] = "invalid"
        if row_id in scored:
            for result in scored[row_id]:
                out[result.metric] = result.score
                out[f"{result.metric}_status"] = result.status if result.status == "ok" else f"unmeasured: {result.reason}"
        out["error"] = invalid.get(row_id, "")
        rows.append(out)
    return pd.DataFrame(rows).astype({metric: "Float64" for metric in metrics})


def summary_table(output: pd.DataFrame, metrics) -> str:
    lines = [f"{'metric':<22}{'mean':>8}  measured", "-" * 42]
    for metric in metrics:
        measured = output.loc[output[f"{metric}_status"] == "ok", metric]
        mean = f"{float(measured.mean()):.3f}" if len(measured) else "n/a"
        lines.append(f"{metric:<22}{mean:>8}  {len(measured)}/{len(output)}")
    return "\n".join(lines)
