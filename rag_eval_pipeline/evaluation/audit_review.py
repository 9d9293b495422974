"""Human labels of an audit's judged items: a sheet to fill in, and the labels it gives back.

`audit_sheet` lays out one row per item the candidate answered in one audit (a run of the audit job):
the texts the judge read, its score and a short evidence text per judged metric, and empty columns for
a person's verdicts. `read_audit_labels` reads the filled-in sheet back as label rows for
evaluation/labels.py. A sheet names its items by (version, run_id, qa_id) only: their texts are read
again from the stored audit, never from the sheet's cells, which a person may have edited, so a label
always belongs to what the judge scored. A sheet with any bad cell is refused whole, every problem named
by row and column; nothing of it is stored.

The sheet is written and read by synthesis/review.py's write_sheet and read_sheet (CSV or JSONL), so a
CSV cell a spreadsheet would run as a formula is written as text and read back as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import OK
from rag_eval_pipeline.core.metrics.formulas import average_precision
from rag_eval_pipeline.core.metrics.registry import BUILTIN, JUDGED_METRICS
from rag_eval_pipeline.core.names import validate_name, validate_run_id
from rag_eval_pipeline.evaluation.labels import label_rows
from rag_eval_pipeline.stores.protocols import ResultsStore

# The sheet's human columns and the metric each one labels (a labels file's column: the metric and
# LABEL_SUFFIX, e.g. faithfulness_label). context_recall and contextual_relevancy get no label here.
YES_NO_LABELS = {
    "faithful": "faithfulness",  # is every statement of the answer supported by the contexts?
    "correct": "answer_correctness",  # does the answer agree with the ground truth?
    "relevant": "answer_relevance",  # does the answer address the question?
}
RANKS_LABEL = ("relevant_contexts", "context_precision")  # the relevant contexts' numbers: average precision
LABEL_COLUMNS = [*YES_NO_LABELS, RANKS_LABEL[0]]
HUMAN_COLUMNS = [*LABEL_COLUMNS, "labeler_note"]
ID_COLUMNS = ["qa_id", "version", "commit", "run_id"]
TEXT_COLUMNS = ["question", "contexts", "answer", "ground_truth"]
REQUIRED_COLUMNS = ["qa_id", "version", "run_id", *LABEL_COLUMNS]
YES, NO = ("1", "yes"), ("0", "no")
NO_CONTEXT = "none"
SCORE_SUFFIX, EVIDENCE_SUFFIX = "_score", "_evidence"
MAX_EVIDENCE_CHARS = 300  # a cell a person reads at a glance; the full evidence stays in metric_scores
MAX_PROBLEMS_SHOWN = 10
MAX_QUOTED_CHARS = 40
CONTEXT_BREAK = "\n\n"


def source_of(run_id: str) -> str:
    """The labels' source: the audit they were read from."""
    return f"review of {run_id}"


@dataclass(frozen=True)
class AuditedItem:
    """An item the judge scored in one audit, as the audit stored it."""

    item: EvalItem
    commit: str


@dataclass(frozen=True)
class AuditSheet:
    frame: pd.DataFrame
    commit: str
    left_out: int  # items the candidate failed on: nothing was judged, nothing to label


@dataclass(frozen=True)
class SheetLabels:
    rows: list[dict]  # evaluation/labels.py's rows, for store_labels
    labelled: dict[str, int]  # items labelled per metric
    items: int  # rows that gave at least one label
    skipped: int  # rows with every label cell blank


# ---- the sheet -------------------------------------------------------------------------------


def audited_items(store: ResultsStore, tenant: str, version: str, run_id: str) -> dict[str, AuditedItem] | None:
    """The answered items of one audit by qa_id, texts as judged; None when the tenant has no such audit."""
    outputs = store.read_audit_table(tenant, version, run_id, "candidate_outputs")
    return None if outputs is None else _answered(outputs, store.read(tenant, version, "golden_set"))


def _answered(outputs: pd.DataFrame, golden: pd.DataFrame) -> dict[str, AuditedItem]:
    # The golden set is immutable once published: its ground truths are the ones the judge read.
    truths = dict(zip(golden["qa_id"].astype(str), golden["ground_truth"].astype(str)))
    answered = outputs[outputs["status"] == OK].to_dict("records")
    return {str(row["qa_id"]): _audited(row, truths.get(str(row["qa_id"]), "")) for row in answered}


def _audited(output: dict, ground_truth: str) -> AuditedItem:
    # As scoring._eval_item builds it; contexts kept to id and text, the item's JSON form in the labels.
    contexts = [{"id": str(c["id"]), "text": str(c["text"])} for c in output["contexts"]]
    item = EvalItem(str(output["qa_id"]), str(output["question"]), str(output["answer"]), contexts, ground_truth)
    return AuditedItem(item, str(output["commit"]))


def audit_sheet(store: ResultsStore, tenant: str, version: str, run_id: str) -> AuditSheet:
    """The sheet of one audit's answered items; ValueError when the tenant has no such audit."""
    validate_run_id(run_id)
    outputs = store.read_audit_table(tenant, version, run_id, "candidate_outputs")
    scores = store.read_audit_table(tenant, version, run_id, "metric_scores")
    if outputs is None or scores is None:
        raise ValueError(
            f"{tenant}/{version} has no audit of run id {run_id!r}"
            + ("" if outputs is None else " with metric scores (it did not finish scoring)")
            + ": `rag-eval gate` and `rag-eval run --job audit` print the run id of each audit"
        )
    items = _answered(outputs, store.read(tenant, version, "golden_set"))
    commit = str(outputs["commit"].iloc[0]) if len(outputs) else ""
    return AuditSheet(sheet_frame(items, scores, version, run_id), commit, len(outputs) - len(items))


def sheet_frame(items: dict[str, AuditedItem], scores: pd.DataFrame, version: str, run_id: str) -> pd.DataFrame:
    """One row per item: ids, the texts, per judged metric its score and evidence, empty human columns."""
    metrics = [m for m in JUDGED_METRICS if m in set(scores["metric"].astype(str))]  # what the sheet labels
    by_item = {(str(r["qa_id"]), str(r["metric"])): r for r in scores.to_dict("records")}
    rows = []
    for qa_id, audited in items.items():
        row = {"qa_id": qa_id, "version": version, "commit": audited.commit, "run_id": run_id}
        row.update(_texts(audited.item))
        for metric in metrics:
            score_row = by_item.get((qa_id, metric))
            row[metric + SCORE_SUFFIX] = _score_cell(score_row)
            row[metric + EVIDENCE_SUFFIX] = evidence_text(score_row) if score_row else ""
        rows.append({**row, **dict.fromkeys(HUMAN_COLUMNS, "")})
    columns = [*ID_COLUMNS, *TEXT_COLUMNS]
    columns += [m + suffix for m in metrics for suffix in (SCORE_SUFFIX, EVIDENCE_SUFFIX)]
    return pd.DataFrame(rows, columns=[*columns, *HUMAN_COLUMNS])


def _texts(item: EvalItem) -> dict[str, str]:
    # Numbered as relevant_contexts names them; the chunk id tells a person where a context comes from.
    numbered = [
        f"[{n}] " + (f"({c['id']}) " if c["id"] else "") + c["text"] for n, c in enumerate(item.contexts, start=1)
    ]
    return {
        "question": item.question,
        "contexts": CONTEXT_BREAK.join(numbered),
        "answer": item.answer,
        "ground_truth": item.ground_truth,
    }


def _score_cell(row: dict | None) -> str:
    """Text, so a sheet's column never mixes numbers with blanks (JSON has no NaN)."""
    if row is None or row["status"] != OK or row["score"] is None or pd.isna(row["score"]):
        return ""
    return f"{float(row['score']):.3f}"


def evidence_text(row: dict) -> str:
    """What the judge found, in a line a person reads beside the score."""
    if row["status"] != OK:
        return _clipped(f"unmeasured: {row['reason']}", MAX_EVIDENCE_CHARS)
    try:
        evidence = json.loads(str(row["evidence"]) or "{}")
    except json.JSONDecodeError:
        evidence = {}
    summary = BUILTIN.get(str(row["metric"]))
    text = summary.evidence_line(evidence) if summary and isinstance(evidence, dict) else json.dumps(evidence)
    return _clipped(text, MAX_EVIDENCE_CHARS)


# ---- reading it back -------------------------------------------------------------------------


def is_audit_sheet(columns) -> bool:
    """An audit sheet has the audit's run id or a label column; a golden-set review sheet has neither."""
    return bool({"run_id", *LABEL_COLUMNS} & {str(c) for c in columns})


# (version, run_id) -> that audit's items by qa_id, None when the tenant has no such audit.
Audits = Callable[[str, str], dict[str, AuditedItem] | None]


def read_audit_labels(store: ResultsStore, tenant: str, sheet: pd.DataFrame) -> SheetLabels:
    """The labels of a filled-in audit sheet, texts from the stored audits; ValueError naming every bad cell."""
    loaded: dict[tuple[str, str], dict[str, AuditedItem] | None] = {}

    def audits(version: str, run_id: str) -> dict[str, AuditedItem] | None:
        if (version, run_id) not in loaded:  # each audit read once, however many rows name it
            loaded[version, run_id] = audited_items(store, tenant, version, run_id)
        return loaded[version, run_id]

    return labels_from_sheet(sheet, audits, tenant)


def labels_from_sheet(sheet: pd.DataFrame, audits: Audits, tenant: str) -> SheetLabels:
    """Every row checked before any label is made: a sheet with a problem gives no label at all."""
    missing = [c for c in REQUIRED_COLUMNS if c not in sheet.columns]
    if missing:
        raise ValueError(f"the audit sheet lacks the columns {', '.join(missing)}: export a fresh one")
    rows, problems, skipped, labelled_rows = [], [], 0, 0
    labelled: dict[str, int] = {}
    first_row: dict[tuple[str, str], int] = {}
    for number, record in enumerate(sheet.to_dict("records"), start=1):
        cells = {column: _text(record.get(column)).strip() for column in sheet.columns}
        if not any(cells[c] for c in LABEL_COLUMNS):
            skipped += 1  # nothing to store; spreadsheets also save blank rows below the data
            continue
        found, problem = _row_item(cells, audits, tenant, first_row, number)
        labels, label_problems = _row_labels(cells, found)
        problems += [f"row {number}, column {p}" for p in ([problem] if problem else []) + label_problems]
        if problem or label_problems or found is None:
            continue
        rows += label_rows(found.item, labels, source_of(cells["run_id"]), commit=found.commit)
        labelled_rows += 1
        for metric in labels:
            labelled[metric] = labelled.get(metric, 0) + 1
    if problems:
        raise ValueError(_problems_message(problems))
    return SheetLabels(rows, labelled, labelled_rows, skipped)


def _row_item(
    cells: dict[str, str], audits: Audits, tenant: str, first_row: dict[tuple[str, str], int], number: int
) -> tuple[AuditedItem | None, str]:
    """The stored item a row names, or the problem ('column: what is wrong')."""
    version, run_id, qa_id = cells["version"], cells["run_id"], cells["qa_id"]
    for column, value, check in (("version", version, _valid_version), ("run_id", run_id, _valid_run_id)):
        problem = check(value)
        if problem:
            return None, f"{column}: {problem}"
    if not qa_id:
        return None, "qa_id: blank"
    items = audits(version, run_id)
    if items is None:
        return None, f"run_id: {tenant}/{version} has no audit {_quoted(run_id)}"
    if qa_id not in items:
        return None, f"qa_id: {_quoted(qa_id)} is not an item the candidate answered in audit {run_id}"
    if (run_id, qa_id) in first_row:
        return (
            None,
            f"qa_id: {_quoted(qa_id)} of audit {run_id} appears again (first on row {first_row[run_id, qa_id]})",
        )
    first_row[run_id, qa_id] = number
    commit = cells.get("commit", "")
    if commit and commit != items[qa_id].commit:
        return None, f"commit: {_quoted(commit)}, but audit {run_id} scored commit {_quoted(items[qa_id].commit)}"
    return items[qa_id], ""


def _valid_version(value: str) -> str:
    if not value:
        return "blank"
    try:
        validate_name("dataset version", value)
    except ValueError:
        return f"{_quoted(value)} is not a dataset version name"
    return ""


def _valid_run_id(value: str) -> str:
    if not value:
        return "blank"
    try:
        validate_run_id(value)
    except ValueError:
        return f"{_quoted(value)} is not a run id"
    return ""


def _row_labels(cells: dict[str, str], found: AuditedItem | None) -> tuple[dict[str, float], list[str]]:
    """{metric: label} of a row's filled-in cells, and the problems ('column: what is wrong')."""
    labels, problems = {}, []
    for column, metric in YES_NO_LABELS.items():
        value = cells[column].lower()
        if value in YES or value in NO:
            labels[metric] = 1.0 if value in YES else 0.0
        elif value:
            problems.append(f"{column}: {_quoted(cells[column])}; use 1, 0, yes, no, or leave it blank")
    column, metric = RANKS_LABEL
    if cells[column] and found is not None:  # the contexts' count comes from the stored item
        relevance, problem = relevant_ranks(cells[column], len(found.item.contexts))
        if problem:
            problems.append(f"{column}: {problem}")
        else:
            labels[metric] = average_precision(relevance)
    return labels, problems


def relevant_ranks(text: str, n_contexts: int) -> tuple[list[int], str]:
    """The relevance of each of the n contexts (1 or 0, by rank) from "1,3" or "none", or the problem."""
    if n_contexts == 0:
        return [], "the candidate retrieved no context for this item: leave it blank"
    allowed = f"use the numbers of the relevant contexts (1 to {n_contexts}, e.g. 1,3), none, or leave it blank"
    if text.lower() == NO_CONTEXT:
        return [0] * n_contexts, ""
    parts = [p for p in re.split(r"[\s,;\[\]]+", text) if p]
    if not parts or not all(p.isdigit() and 1 <= int(p) <= n_contexts for p in parts):
        return [], f"{_quoted(text)}; {allowed}"
    marked = {int(p) for p in parts}
    return [1 if rank in marked else 0 for rank in range(1, n_contexts + 1)], ""


def _problems_message(problems: list[str]) -> str:
    """The first problems and how many more: a sheet of thousands of bad rows still gets one short line."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = [f"and {len(problems) - len(shown)} more"] if len(problems) > len(shown) else []
    noun = "problem" if len(problems) == 1 else "problems"
    return f"the audit sheet has {len(problems)} {noun}, nothing was stored: " + "; ".join(shown + more)


def _quoted(text: str) -> str:
    return repr(_clipped(text, MAX_QUOTED_CHARS))


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(value) -> str:
    """A cell as text: missing values (None, NaN) are empty."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)
