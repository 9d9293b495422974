"""Human review of a golden set: a sheet to fill in, and the reviewed golden set it makes.

`review_sheet` lays out what a reviewer needs per item, with empty `decision`, `edited_question`,
`edited_ground_truth` and `reviewer_note` columns; it is exported as CSV or JSONL. `apply_review`
reads the filled-in sheet back: accept keeps an item, reject moves it to the rejected table, edit
makes a new item (new content-hash qa_id, `derived_from` the old one) whose ground truth must again
be supported by its gold chunks. A blank decision keeps the item as unreviewed. A sheet that cannot
be applied as written is refused with its problems and their rows (the first MAX_PROBLEMS_SHOWN), never
half applied; so is a review that keeps no item.

A CSV sheet is opened in a spreadsheet, which runs a cell that starts with `=`, `+`, `-`, `@`, a tab or
a carriage return as a formula: a tenant's documents must not run code on the reviewer's machine, so
such a cell is written after a `'` (the spreadsheet's "this is text" mark), and read back with or
without it, as the spreadsheet showed it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rag_eval_pipeline.core.files import atomic_write_text, write_atomically
from rag_eval_pipeline.core.jsonl import read_json_lines
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS, ITEM_COLUMNS, REJECTED_COLUMNS, UNANSWERABLE, normalise
from rag_eval_pipeline.synthesis.quality import assess

ACCEPT, REJECT, EDIT = "accept", "reject", "edit"
DECISIONS = (ACCEPT, REJECT, EDIT)
REVIEW_COLUMNS = ["decision", "edited_question", "edited_ground_truth", "reviewer_note"]
# quality_score (0 to 1, from the quality stage) lets a reviewer sort the weakest questions first.
SHEET_COLUMNS = [
    "qa_id",
    "question_type",
    "quality_score",
    "question",
    "ground_truth",
    "gold_chunk_ids",
    "gold_contexts",
    *REVIEW_COLUMNS,
]
REQUIRED_COLUMNS = ("qa_id", "decision")
REVIEWED_COLUMNS = GOLDEN_COLUMNS + ["review", "derived_from"]
SHEET_FORMATS = (".csv", ".jsonl")
ID_SEPARATOR = " | "
CONTEXT_SEPARATOR = "\n\n----- next gold context -----\n\n"
REVIEW_STAGE = "review"
MAX_PROBLEMS_SHOWN = 10  # a sheet's problems named in its error; the rest are counted
MAX_QUOTED_CHARS = 60  # of a cell quoted in a problem
# What makes a spreadsheet read a cell as a formula (OWASP's list), and the mark that makes it text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")
# Spaces a spreadsheet may trim before it reads a formula start.
LEADING_SPACES = " \u00a0"
TEXT_MARK = "'"

# verify(ground_truth, gold_contexts) -> the reason it is not supported, or None when it is.
Verify = Callable[[str, list], str | None]


@dataclass(frozen=True)
class ReviewResult:
    golden: pd.DataFrame  # REVIEWED_COLUMNS
    rejected: pd.DataFrame  # REJECTED_COLUMNS, stage "review"
    summary: dict[str, int]  # accepted, edited, rejected, edit_rejected, unreviewed
    outcomes: dict[str, str]  # qa_id of each reviewed item -> its key of the summary


@dataclass(frozen=True)
class _Decision:
    row: int  # 1-based data row of the sheet, as a person counts them
    decision: str  # "" when the reviewer left it blank
    question: str  # edited question, "" if unchanged
    ground_truth: str  # edited ground truth, "" if unchanged
    note: str


# ---- the sheet -------------------------------------------------------------------------------


def with_quality_columns(golden: pd.DataFrame) -> pd.DataFrame:
    """A golden set published before the quality stage existed, given its columns: the score the stage
    gives its question now (no topic, no source: what it reads alone), and an empty topic."""
    if {"quality_score", "topic"} <= set(golden.columns):
        return golden
    golden = golden.copy()
    if "topic" not in golden:
        golden["topic"] = ""
    if "quality_score" not in golden:
        golden["quality_score"] = [
            assess(str(q), str(t)).score for q, t in zip(golden["question"], golden["question_type"])
        ]
    return golden


def review_sheet(golden: pd.DataFrame) -> pd.DataFrame:
    """One row per item with what a reviewer reads, and empty columns for what they decide."""
    golden = with_quality_columns(golden)
    rows = [
        {
            "qa_id": str(item["qa_id"]),
            "question_type": str(item["question_type"]),
            "quality_score": float(item["quality_score"]),
            "question": str(item["question"]),
            "ground_truth": str(item["ground_truth"]),
            "gold_chunk_ids": ID_SEPARATOR.join(str(c) for c in _as_list(item["gold_chunk_ids"])),
            "gold_contexts": CONTEXT_SEPARATOR.join(str(c) for c in _as_list(item["gold_contexts"])),
            **{column: "" for column in REVIEW_COLUMNS},
        }
        for item in golden.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=SHEET_COLUMNS)


def write_sheet(sheet: pd.DataFrame, path: Path | str) -> Path:
    """CSV or JSONL by the file's extension, UTF-8. A CSV cell a spreadsheet would run as a formula is
    marked as text; JSONL is read by programs and editors, which run nothing: it keeps the text as it is."""
    path = Path(path)
    if _sheet_format(path) == ".csv":
        # Every text field quoted: commas, quotes and line breaks (a lone carriage return too) stay in
        # their cell; pandas reads them back as written.
        safe = sheet.map(lambda value: as_spreadsheet_text(value) if isinstance(value, str) else value)
        return write_atomically(
            path, lambda partial: safe.to_csv(partial, index=False, encoding="utf-8", quoting=csv.QUOTE_NONNUMERIC)
        )
    lines = [json.dumps(row, ensure_ascii=False) for row in sheet.to_dict("records")]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


def as_spreadsheet_text(text: str) -> str:
    """The text with the mark that makes a spreadsheet show it rather than run it, when it needs one."""
    return TEXT_MARK + text if _needs_mark(text) else text


def _unmarked(text: str) -> str:
    """What as_spreadsheet_text was given: its mark removed (any other text is unchanged)."""
    return text[len(TEXT_MARK) :] if text.startswith(TEXT_MARK) and _needs_mark(text[len(TEXT_MARK) :]) else text


def _needs_mark(text: str) -> bool:
    # Text already starting with marks before a formula start gets one more, so that removing one on the
    # way back gives it exactly: nothing the sheet carries changes.
    return text.lstrip(TEXT_MARK).lstrip(LEADING_SPACES).startswith(FORMULA_STARTS)


def read_sheet(path: Path | str) -> pd.DataFrame:
    """A filled-in sheet, every cell as text."""
    path = Path(path)
    suffix = _sheet_format(path)
    if not path.is_file():
        raise FileNotFoundError(f"review sheet {path} does not exist")
    if suffix == ".csv":
        # utf-8-sig: spreadsheet programs often add a byte-order mark when they save. A cell is read as the
        # spreadsheet showed it, whether its program saved it with its text mark or without.
        sheet = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        return sheet.map(_unmarked)
    # utf-8-sig here too: editors on Windows add a byte-order mark to JSON files as well.
    records = read_json_lines(path, encoding="utf-8-sig")
    return pd.DataFrame(records).map(_text) if records else pd.DataFrame(columns=SHEET_COLUMNS)


def _sheet_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SHEET_FORMATS:
        raise ValueError(f"{path}: unsupported review sheet format {suffix!r}; use .csv or .jsonl")
    return suffix


# ---- applying a review -----------------------------------------------------------------------


def apply_review(golden: pd.DataFrame, decisions: pd.DataFrame, verify: Verify) -> ReviewResult:
    """The reviewed golden set, the items the review removed, and counts per outcome."""
    golden = with_quality_columns(golden)
    missing = [c for c in GOLDEN_COLUMNS if c not in golden.columns]
    if missing:
        raise ValueError(f"the golden set lacks the columns {missing}: re-materialize it")
    duplicated = golden["qa_id"][golden["qa_id"].duplicated()].tolist()
    if duplicated:
        raise ValueError(f"the golden set has duplicate qa_ids {duplicated[:5]}: it cannot be reviewed by id")
    items = golden.to_dict("records")
    by_id = _parse_sheet(decisions, {str(item["qa_id"]): item for item in items})
    kept, rejected, outcomes = [], [], {}
    summary: dict[str, int] = dict.fromkeys(("accepted", "edited", "rejected", "edit_rejected", "unreviewed"), 0)
    for item in items:
        decision = by_id.get(str(item["qa_id"]))
        outcome = _apply_one(item, decision, verify)
        summary[outcome.status] += 1
        outcomes[str(item["qa_id"])] = outcome.status
        (kept if outcome.kept else rejected).append(outcome.row)
    _check_unique_ids(kept, by_id)
    if not kept:
        removed = [f"{summary['rejected']} rejected by the reviewer"] + (
            [f"{summary['edit_rejected']} edits failed verification"] if summary["edit_rejected"] else []
        )
        raise ValueError(
            f"the review keeps no item of the golden set ({', '.join(removed)}): nothing to publish; "
            "a golden set needs at least one item"
        )
    return ReviewResult(
        golden=pd.DataFrame(kept, columns=REVIEWED_COLUMNS),
        rejected=pd.DataFrame(rejected, columns=REJECTED_COLUMNS),
        summary=summary,
        outcomes=outcomes,
    )


def types_expected_after_review(expected: set[str], golden: pd.DataFrame, result: ReviewResult) -> set[str]:
    """The question types the reviewed golden set must still have, for the expectations suite.

    Those the synthesis expects (`expected`) and the reviewed version has, except a type whose every item
    the reviewer rejected: the type-mix rule catches a generator or verifier that lost a type, while this
    is a person's decision. A type lost to edits that failed verification is still expected.
    """
    by_type: dict[str, set[str]] = {}
    for qa_id, question_type in zip(golden["qa_id"].astype(str), golden["question_type"].astype(str)):
        by_type.setdefault(question_type, set()).add(result.outcomes.get(qa_id, "unreviewed"))
    return {t for t in expected if t in by_type and by_type[t] != {"rejected"}}


@dataclass(frozen=True)
class _Outcome:
    status: str  # a key of the summary
    kept: bool
    row: dict


def _apply_one(item: dict, decision: _Decision | None, verify: Verify) -> _Outcome:
    base = {**{c: item[c] for c in GOLDEN_COLUMNS}, "derived_from": ""}
    for column in ("gold_chunk_ids", "gold_contexts", "source_chunk_ids"):
        base[column] = [str(v) for v in _as_list(item[column])]
    if decision is None or not decision.decision:
        return _Outcome("unreviewed", True, {**base, "review": "unreviewed"})
    if decision.decision == ACCEPT:
        return _Outcome("accepted", True, {**base, "review": "accepted"})
    if decision.decision == REJECT:
        reason = f"rejected by reviewer: {decision.note or 'no note given'}"
        return _Outcome("rejected", False, _rejected_row(base, reason))
    return _edit(base, decision, verify)


def _edit(base: dict, decision: _Decision, verify: Verify) -> _Outcome:
    question = decision.question or str(base["question"])
    ground_truth = decision.ground_truth or str(base["ground_truth"])
    reworded = normalise(question) != normalise(str(base["question"]))
    edited = {
        **base,
        "qa_id": edited_qa_id(base["question_type"], base["gold_chunk_ids"], question, ground_truth),
        "question": question,
        "ground_truth": ground_truth,
        "derived_from": str(base["qa_id"]),
        "review": "edited",
        # The reviewer's wording is kept whatever the stage thinks of it; the score still says what that
        # is (0: the stage would have rejected it). An edit of the ground truth alone keeps the score.
        "quality_score": assess(question, base["question_type"]).score if reworded else base["quality_score"],
        "topic": "" if reworded else base["topic"],
    }
    if base["question_type"] == UNANSWERABLE:
        # Its ground truth is the refusal, which no chunk supports; nothing to re-verify.
        return _Outcome("edited", True, edited)
    reason = verify(ground_truth, list(base["gold_contexts"]))
    if reason:
        reason = f"edit of {base['qa_id']} failed verification: {reason}"
        return _Outcome("edit_rejected", False, _rejected_row(edited, reason))
    # round_trip_rank stays the parent's: re-measuring it needs the reference retriever, not available here.
    return _Outcome("edited", True, {**edited, "grounded": True})


def edited_qa_id(question_type: str, gold_chunk_ids: list, question: str, ground_truth: str) -> str:
    """make_item's content hash plus the ground truth: an edit may change only the ground truth,
    and must still get an id of its own."""
    gold = ",".join(str(c) for c in gold_chunk_ids)
    return sha256(f"{question_type}|{gold}|{normalise(question)}|{normalise(ground_truth)}")[:16]


def _rejected_row(row: dict, reason: str) -> dict:
    return {**{c: row[c] for c in ITEM_COLUMNS}, "stage": REVIEW_STAGE, "reason": reason}


def _check_unique_ids(kept: list[dict], by_id: dict[str, _Decision]) -> None:
    """Two edits (or an edit and a kept item) that end up the same item would make a duplicate qa_id."""
    seen: dict[str, dict] = {}
    for row in kept:
        if row["qa_id"] in seen:
            first, again = seen[row["qa_id"]], row
            culprit = again if again["derived_from"] else first
            number = by_id[culprit["derived_from"]].row
            raise ValueError(f"review sheet row {number}: the edit makes the same item as another one ({row['qa_id']})")
        seen[row["qa_id"]] = row


# ---- reading the sheet -----------------------------------------------------------------------


def _parse_sheet(sheet: pd.DataFrame, items: dict[str, dict]) -> dict[str, _Decision]:
    """qa_id -> decision for every row; raises one ValueError naming the bad rows.

    A row whose every cell is blank says nothing (spreadsheets save the empty rows below the data) and
    is skipped; rows keep their numbers all the same.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in sheet.columns]
    if missing:
        raise ValueError(f"the review sheet lacks the columns {missing} (expected {', '.join(SHEET_COLUMNS)})")
    decisions: dict[str, _Decision] = {}
    first_row: dict[str, int] = {}
    problems = []
    for number, row in enumerate(sheet.to_dict("records"), start=1):
        cells = {column: _text(row.get(column)).strip() for column in SHEET_COLUMNS}
        if not any(cells.values()):
            continue
        qa_id = cells["qa_id"]
        if qa_id and qa_id in first_row:
            problems.append(f"row {number}: qa_id {_clipped(qa_id)} appears again (first on row {first_row[qa_id]})")
            continue
        first_row[qa_id] = number
        problem = _row_problem(cells, items)
        if problem:
            problems.append(f"row {number} (qa_id {_clipped(qa_id) or 'blank'}): {problem}")
            continue
        decisions[qa_id] = _Decision(
            row=number,
            decision=cells["decision"].lower(),
            question=cells["edited_question"],
            ground_truth=cells["edited_ground_truth"],
            note=cells["reviewer_note"],
        )
    if problems:
        raise ValueError(_problems_message(problems))
    return decisions


def _problems_message(problems: list[str]) -> str:
    """The first problems and how many more: a sheet of 200,000 bad rows still gets a short error."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = [f"and {len(problems) - len(shown)} more"] if len(problems) > len(shown) else []
    noun = "problem" if len(problems) == 1 else "problems"
    return f"the review sheet has {len(problems)} {noun}:\n  " + "\n  ".join(shown + more)


def _row_problem(cells: dict[str, str], items: dict[str, dict]) -> str | None:
    """Why a sheet row cannot be applied, or None."""
    if not cells["qa_id"]:
        return "no qa_id"
    item = items.get(cells["qa_id"])
    if item is None:
        return "this qa_id is not in the golden set of this version"
    decision = cells["decision"].lower()
    if decision and decision not in DECISIONS:
        return f"unknown decision {_quoted(cells['decision'])}; use accept, reject, edit, or leave it blank"
    for column in ("question", "ground_truth"):
        if cells[column] and _squash(cells[column]) != _squash(item[column]):
            return f"the {column} cell was changed; write the new text in edited_{column} with decision edit"
    edited = cells["edited_question"] or cells["edited_ground_truth"]
    if decision != EDIT:
        return f"edited text given but the decision is {_quoted(decision or 'blank')}; use edit" if edited else None
    if not edited:
        return "decision edit needs edited_question or edited_ground_truth"
    if (
        item["question_type"] == UNANSWERABLE
        and cells["edited_ground_truth"]
        and (_squash(cells["edited_ground_truth"]) != _squash(item["ground_truth"]))
    ):
        return "an unanswerable question keeps its refusal as ground truth; edit only its question"
    if _squash(cells["edited_question"] or item["question"]) == _squash(item["question"]) and _squash(
        cells["edited_ground_truth"] or item["ground_truth"]
    ) == _squash(item["ground_truth"]):
        return "the edit changes neither the question nor the ground truth"
    return None


def _quoted(text: str) -> str:
    """A cell quoted in a problem, cut short: a problem stays one short line whatever the cell holds."""
    return repr(_clipped(text))


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 1] + "…"


def _squash(text) -> str:
    """Text with runs of whitespace made one space: a sheet round trip may rewrap lines."""
    return " ".join(str(text).split())


def _text(value) -> str:
    """A cell as text: missing values (None, NaN) are empty."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)


def _as_list(value) -> list:
    """Parquet gives list columns back as numpy arrays."""
    if value is None:
        return []
    return value.tolist() if hasattr(value, "tolist") else list(value)


# ---- the grounding check ---------------------------------------------------------------------


def judge_verifier(judge) -> Verify:
    """A Verify from a judge's `statements` and `verify` (OfflineJudge): the synthesis grounding check."""

    def verify(ground_truth: str, gold_contexts: list) -> str | None:
        statements = judge.statements(ground_truth)
        if not statements:
            return "ground truth makes no checkable statement"
        unsupported = [s.statement for s in judge.verify(statements, list(gold_contexts)) if not s.supported]
        if unsupported:
            return f"ground truth not supported by its gold chunks: {unsupported[0][:120]}"
        return None

    return verify
