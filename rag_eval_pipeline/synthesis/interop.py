"""Golden sets and evaluation rows in the file formats of RAGAS and DeepEval, in and out.

Three formats, written from the peers' documentation (neither peer is installed here):

- `ragas`: a RAGAS EvaluationDataset of single-turn samples. `.jsonl` is one object a line, as its
  `to_jsonl` writes it; `.csv` is what its `to_csv` writes (Python's csv module, so a list cell is
  Python's repr, `['a', "it's"]`; a JSON list is read as well; core/cells.py). Columns `user_input`, `reference`,
  `reference_contexts`, `reference_context_ids`, and for evaluation rows `response`, `retrieved_contexts`,
  `retrieved_context_ids`.
- `ragas-testset`: what RAGAS's TestsetGenerator writes, the same files with `user_input`,
  `reference_contexts`, `reference` and `synthesizer_name`.
- `deepeval`: DeepEval goldens or test cases as `EvaluationDataset.save_as(file_type="json")` writes them,
  a `.json` array of objects with `input`, `expected_output`, `context` (the gold contexts), and for test
  cases `actual_output` and `retrieval_context`. DeepEval's CSV (contexts joined with `|`) is not read.

Our own fields ride along where the peer has no place for them: extra columns `qa_id` and `question_type`
in RAGAS files, `additional_metadata` in DeepEval's, so a golden set taken out and brought back keeps its
ids and types. A CSV is opened in spreadsheets, which run a cell that starts with `=`, `+`, `-`, `@`, a tab
or a carriage return as a formula: such a cell is written after the spreadsheet's text mark `'`, as review
sheets are (synthesis/review.py), and read back with exactly one mark taken off, so our CSV export imports
back as it was. JSONL and JSON are written exactly: they are the exchange formats for programs.

`import_golden_set` turns a file into golden-set items: the question, the reference as ground truth, the
reference contexts as gold contexts with their ids (or ids made from their text), a question type (ours,
else unanswerable for a declining reference, else the RAGAS synthesizer's, else simple), and one
`document_chunks` row per distinct context for the audit's reference candidate to retrieve over. Each
ground truth is checked against its gold contexts by the `verify` it is given (none: taken as given); an
item that fails, repeats an earlier one, has no reference (unless its own type says unanswerable), has a
field over MAX_FIELD_CHARS, or cannot be an item of a golden set otherwise goes to the rejected items with
its reason and row. A file in neither format is refused in one line naming what was expected; a malformed
row is refused with its line (JSONL), row (CSV, 1 is the first under the header) or item (JSON, 1 is the
first), and so is a key given twice in an object (JSON keeps the last) or a column named twice in a CSV.
Pure: no Dagster, no click.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rag_eval_pipeline.core.cells import list_cell, read_text_csv
from rag_eval_pipeline.core.defaults import MAX_FIELD_CHARS
from rag_eval_pipeline.core.files import atomic_write_text
from rag_eval_pipeline.core.jsonl import JsonLine, NotAnArray, iter_json_lines, read_json_array
from rag_eval_pipeline.core.text import count_tokens, field_text, is_noncommittal, scorable_text, sha256
from rag_eval_pipeline.ingest.chunking import PROSE, Chunk
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    MULTI_CONTEXT,
    QUESTION_TYPES,
    REFUSAL,
    REJECTED_COLUMNS,
    SIMPLE,
    UNANSWERABLE,
    normalise,
)
from rag_eval_pipeline.synthesis.pipeline import PLAN_COLUMNS
from rag_eval_pipeline.synthesis.quality import assess
from rag_eval_pipeline.synthesis.review import as_spreadsheet_text

if TYPE_CHECKING:  # an audit's items, read by evaluation/audit_review.py
    from rag_eval_pipeline.core.judging.item import EvalItem

RAGAS, RAGAS_TESTSET, DEEPEVAL = "ragas", "ragas-testset", "deepeval"
FORMATS = (RAGAS, RAGAS_TESTSET, DEEPEVAL)
SUFFIXES = {RAGAS: (".jsonl", ".csv"), RAGAS_TESTSET: (".jsonl", ".csv"), DEEPEVAL: (".json",)}
ALL_SUFFIXES = tuple(dict.fromkeys(suffix for suffixes in SUFFIXES.values() for suffix in suffixes))
REQUIRED_KEY = {RAGAS: "user_input", RAGAS_TESTSET: "user_input", DEEPEVAL: "input"}  # the question's column
# What each format's file is, for the line that refuses a file in none of them.
EXPECTS = {
    RAGAS: "a RAGAS dataset (.jsonl or .csv with a user_input column)",
    RAGAS_TESTSET: "a RAGAS testset (.jsonl or .csv with a user_input column)",
    DEEPEVAL: "DeepEval goldens (a .json array of objects with an input key)",
}
EXPECTED = f"{EXPECTS[RAGAS]} nor {EXPECTS[DEEPEVAL]}"
METADATA = "additional_metadata"  # DeepEval's free-form object: where our own fields go
IMPORTED_DOC = "imported"  # the doc_id of contexts that came without ids: imported#<hash of the text>
CHUNK_COLUMNS = [f.name for f in fields(Chunk)]
MAX_PROBLEMS_SHOWN = 10
MAX_QUOTED_CHARS = 60
# RAGAS's synthesizers for our types; a type it has no synthesizer for is written as rag_eval_<type>.
SYNTHESIZERS = {SIMPLE: "single_hop_specific_query_synthesizer", MULTI_CONTEXT: "multi_hop_specific_query_synthesizer"}
OWN_SYNTHESIZER = "rag_eval_"
# The start of a synthesizer's name -> the type of the questions it writes.
SYNTHESIZER_TYPES = (("single_hop", SIMPLE), ("multi_hop", MULTI_CONTEXT))
MIN_QUESTION_CHARS = 10  # the expectations suite's floor (expectations.MIN_QUESTION_CHARS, checked by a test)
# Why an item without a reference is rejected: nothing says the documents do not answer its question.
NO_REFERENCE = (
    "no reference answer to verify: give the reference, or mark the item unanswerable with a declining reference"
)

# verify(ground_truth, gold_contexts) -> why it is not supported, or None (synthesis/review.judge_verifier).
Verify = Callable[[str, list], str | None]

# Our fields -> what each format calls them; "additional_metadata.x" is x inside DeepEval's metadata object.
RAGAS_NAMES = {
    "question": "user_input",
    "reference": "reference",
    "contexts": "reference_contexts",
    "context_ids": "reference_context_ids",
    "qa_id": "qa_id",
    "question_type": "question_type",
    "synthesizer": "synthesizer_name",
}
DEEPEVAL_NAMES = {
    "question": "input",
    "reference": "expected_output",
    "contexts": "context",
    "context_ids": f"{METADATA}.gold_chunk_ids",
    "qa_id": f"{METADATA}.qa_id",
    "question_type": f"{METADATA}.question_type",
    "synthesizer": f"{METADATA}.synthesizer_name",
}


@dataclass(frozen=True)
class PeerRow:
    where: str  # "line 3" (JSONL), "row 2" (CSV), "item 1" (JSON)
    record: dict


@dataclass(frozen=True)
class PeerFile:
    path: Path
    format: str  # one of FORMATS
    rows: list[PeerRow]


@dataclass(frozen=True)
class ImportedSet:
    golden: pd.DataFrame  # GOLDEN_COLUMNS, in the file's order
    rejected: pd.DataFrame  # REJECTED_COLUMNS: each reason starts with the item's row
    chunks: pd.DataFrame  # CHUNK_COLUMNS: one per distinct context the file brought
    plan: pd.DataFrame  # PLAN_COLUMNS: per question type, the file's items and those kept
    verified: bool  # False: the ground truths were taken as given


@dataclass(frozen=True)
class _Entry:
    """One row in our terms."""

    where: str
    qa_id: str
    question: str
    ground_truth: str
    question_type: str
    contexts: list[str]
    context_ids: list[str]
    synthesizer: str
    oversized: str = ""  # which field is over MAX_FIELD_CHARS and by how much, or ""


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    marked: int  # CSV cells written after the spreadsheet's text mark (0 for JSON and JSONL)


# ---- reading a peer's file -------------------------------------------------------------------


def read_peer_file(path: Path | str, format: str | None = None) -> PeerFile:
    """The file's rows and its format (as given, else told by its extension and columns); ValueError in one
    line for a file in neither format (or not in the one given), and for a file with malformed rows (each named)."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in (SUFFIXES[format] if format else ALL_SUFFIXES):
        raise _foreign(path, format)
    rows, keys = _rows(path, suffix, format)
    if not rows:
        raise ValueError(f"{path} holds no rows: nothing to import")
    if format is not None and REQUIRED_KEY[format] not in keys:
        raise _foreign(path, format)
    return PeerFile(path, format or _detect(path, suffix, keys), rows)


def _foreign(path: Path, format: str | None) -> ValueError:
    return ValueError(f"{path} is not {EXPECTS[format]}" if format else f"{path} is neither {EXPECTED}")


def _rows(path: Path, suffix: str, format: str | None) -> tuple[list[PeerRow], set[str]]:
    """The rows and the keys (columns) they have."""
    if suffix == ".csv":
        frame = _csv_frame(path)
        rows = [PeerRow(f"row {n}", record) for n, record in enumerate(frame.to_dict("records"), start=1)]
        keys = set(map(str, frame.columns))
    elif suffix == ".jsonl":
        lines = iter_json_lines(path, encoding="utf-8-sig", unique_keys=True)
        rows = _checked(path, [(f"line {line.number}", line) for line in lines])
        keys = {key for row in rows for key in row.record}
    else:
        try:
            items = read_json_array(path)
        except NotAnArray:
            raise _foreign(path, format) from None
        rows = _checked(path, [(f"item {item.number}", item) for item in items])
        keys = {key for row in rows for key in row.record}
    return rows, keys


def _checked(path: Path, lines: list[tuple[str, JsonLine]]) -> list[PeerRow]:
    problems = [f"{where}: {line.problem}" for where, line in lines if line.record is None]
    if problems:
        raise ValueError(problems_message(path, problems))
    return [PeerRow(where, line.record) for where, line in lines if line.record is not None]


def _csv_frame(path: Path) -> pd.DataFrame:
    """Every cell as text, with the spreadsheet's text mark taken off once where our export put it."""
    return read_text_csv(path).map(_unmarked)


def _unmarked(text: str) -> str:
    """What as_spreadsheet_text was given: one mark off a cell that it would have marked, any other unchanged
    (read_sheet's rule for review sheets, spelt with the one function that says which cells are marked)."""
    return text[1:] if as_spreadsheet_text(text[1:]) == text else text


def _detect(path: Path, suffix: str, keys: set[str]) -> str:
    """The format the file's extension and keys say; ValueError naming what was expected when they say neither."""
    if suffix in SUFFIXES[DEEPEVAL] and REQUIRED_KEY[DEEPEVAL] in keys:
        return DEEPEVAL
    if suffix in SUFFIXES[RAGAS] and REQUIRED_KEY[RAGAS] in keys:
        return RAGAS_TESTSET if "synthesizer_name" in keys else RAGAS
    raise _foreign(path, None)


def problems_message(path: Path, problems: list[str]) -> str:
    """The first problems and how many more, in one line: a file of 200,000 bad rows still gets a short error."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = [f"and {len(problems) - len(shown)} more"] if len(problems) > len(shown) else []
    noun = "problem" if len(problems) == 1 else "problems"
    return f"{path} has {len(problems)} {noun}, nothing was imported: " + "; ".join(shown + more)


# ---- a peer's rows as golden-set items -------------------------------------------------------


def import_golden_set(peer: PeerFile, verify: Verify | None) -> ImportedSet:
    """The file's rows as a golden set, its rejected items and its chunks; ValueError (one line) for
    malformed rows, or when no item is left to publish."""
    entries = _entries(peer)
    kept, rejected = [], []
    seen: dict[str, str] = {}
    for entry in entries:
        reason = _rejection(entry, seen, verify)
        seen.setdefault(entry.qa_id, entry.where)
        (rejected if reason else kept).append((entry, reason))
    if not kept:
        raise ValueError(
            f"no item of {peer.path} can be published ({len(rejected)} rejected, the first: "
            f"{rejected[0][0].where}: {rejected[0][1]})"
        )
    generator = f"imported:{peer.format}"
    return ImportedSet(
        golden=pd.DataFrame([_golden_row(e, generator) for e, _ in kept], columns=GOLDEN_COLUMNS),
        rejected=pd.DataFrame([_rejected_row(e, generator, r) for e, r in rejected], columns=REJECTED_COLUMNS),
        chunks=_chunks(entries),
        plan=_plan(entries, [e for e, _ in kept], peer),
        verified=verify is not None,
    )


def _entries(peer: PeerFile) -> list[_Entry]:
    """Every row in our terms; ValueError naming every malformed row."""
    names = DEEPEVAL_NAMES if peer.format == DEEPEVAL else RAGAS_NAMES
    entries, problems = [], []
    for row in peer.rows:
        try:
            entries.append(_entry(row, names))
        except ValueError as error:
            problems.append(f"{row.where}: {error}")
    problems += _id_conflicts(entries)
    if problems:
        raise ValueError(problems_message(peer.path, problems))
    return entries


def _entry(row: PeerRow, names: dict[str, str]) -> _Entry:
    values = _flattened(row.record)
    question = _text(values.get(names["question"]), names["question"])
    if not question:
        raise ValueError(f"no {names['question']}")
    reference = _text(values.get(names["reference"]), names["reference"])
    contexts = _texts(values.get(names["contexts"]), names["contexts"])
    ids = _texts(values.get(names["context_ids"]), names["context_ids"])
    if ids and len(ids) != len(contexts):
        raise ValueError(f"{len(ids)} {names['context_ids']} for {len(contexts)} {names['contexts']}")
    synthesizer = _text(values.get(names["synthesizer"]), names["synthesizer"])
    own_type = _text(values.get(names["question_type"]), names["question_type"])
    question_type = _question_type(own_type, synthesizer, reference, names["question_type"])
    qa_id = _text(values.get(names["qa_id"]), names["qa_id"])
    sized = {
        names["question"]: question,
        names["reference"]: reference,
        **{f"{names['contexts']} {n}": text for n, text in enumerate(contexts, start=1)},
        **{f"{names['context_ids']} {n}": chunk_id for n, chunk_id in enumerate(ids, start=1)},
        names["qa_id"]: qa_id,
        names["synthesizer"]: synthesizer,
    }
    return _Entry(
        where=row.where,
        qa_id=qa_id or imported_qa_id(question, reference),
        question=question,
        # No reference: a refusal only when our own type says the item is unanswerable; else none, and rejected.
        ground_truth=reference or (REFUSAL if question_type == UNANSWERABLE else ""),
        question_type=question_type,
        contexts=contexts,
        context_ids=ids or [imported_chunk_id(text) for text in contexts],
        synthesizer=synthesizer,
        oversized=_oversized(sized),
    )


def _oversized(texts: dict[str, str]) -> str:
    """Why the first text over MAX_FIELD_CHARS is refused, in `rag-eval evaluate`'s words; "" when none is."""
    for what, text in texts.items():
        if len(text) > MAX_FIELD_CHARS:
            try:
                field_text(text, what)
            except ValueError as error:
                return str(error)
    return ""


def _flattened(record: dict) -> dict:
    """The record with DeepEval's metadata object's keys beside its own, as additional_metadata.<key>."""
    metadata = record.get(METADATA)
    if metadata is None:
        return record
    if not isinstance(metadata, dict):
        raise ValueError(f"{METADATA} is not an object")
    return {**record, **{f"{METADATA}.{key}": value for key, value in metadata.items()}}


def _text(value, what: str) -> str:
    """The text, stripped; "" when absent. A lone surrogate that JSON let in ("\\ud800", which nothing that
    writes UTF-8 takes) is read as U+FFFD, as `rag-eval evaluate` reads it."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{what} is not text")
    return scorable_text(value.strip())


def _texts(value, what: str) -> list[str]:
    """A list of texts from a JSON list or a CSV cell; [] when absent or blank."""
    if isinstance(value, str):
        value = list_cell(value, what) if value.strip() else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    if not all(isinstance(text, str) for text in value):
        raise ValueError(f"{what} holds something other than text")
    return [scorable_text(text.strip()) for text in value]


def _question_type(own: str, synthesizer: str, reference: str, what: str) -> str:
    """Ours, else unanswerable for a reference that declines, else the synthesizer's, else simple. A missing
    reference says nothing about the question: its item is rejected unless our own type (the question_type
    column, or a rag_eval_<type> synthesizer we wrote) says unanswerable."""
    if own:
        if own not in QUESTION_TYPES:
            raise ValueError(f"unknown {what} {_quoted(own)}; known: {', '.join(QUESTION_TYPES)}")
        return own
    if reference and is_noncommittal(reference):
        return UNANSWERABLE
    return type_of_synthesizer(synthesizer) or SIMPLE


def type_of_synthesizer(name: str) -> str | None:
    """The question type a RAGAS synthesizer writes (None: not one we know)."""
    own = name.removeprefix(OWN_SYNTHESIZER)
    if name.startswith(OWN_SYNTHESIZER) and own in QUESTION_TYPES:
        return own
    return next((kind for start, kind in SYNTHESIZER_TYPES if name.startswith(start)), None)


def imported_qa_id(question: str, reference: str) -> str:
    """The id of an item that came without ours: a hash of its question and reference."""
    return sha256(f"{normalise(question)}|{normalise(reference)}")[:16]


def imported_chunk_id(text: str) -> str:
    """The id of a context that came without one: a hash of its text."""
    return f"{IMPORTED_DOC}#{sha256(text)[:12]}"


def _id_conflicts(entries: list[_Entry]) -> list[str]:
    """One context id naming two different texts: the chunks table could hold only one of them."""
    first: dict[str, tuple[str, str]] = {}
    problems = []
    for entry in entries:
        for chunk_id, text in zip(entry.context_ids, entry.contexts):
            where, earlier = first.setdefault(chunk_id, (entry.where, text))
            if earlier != text:
                problems.append(f"{entry.where}: context id {_quoted(chunk_id)} names another text on {where}")
    return problems


def _rejection(entry: _Entry, seen: dict[str, str], verify: Verify | None) -> str | None:
    """Why the entry cannot be an item of the golden set (stage: reason), or None."""
    if entry.oversized:
        return f"form: {entry.oversized}"
    if entry.qa_id in seen:
        return f"duplicate: the same item as {seen[entry.qa_id]} (qa_id {entry.qa_id})"
    if len(entry.question) < MIN_QUESTION_CHARS:
        return f"form: a question of fewer than {MIN_QUESTION_CHARS} characters"
    if not entry.ground_truth:
        return f"form: {NO_REFERENCE}"
    if entry.question_type == UNANSWERABLE:
        return None  # its ground truth is a refusal, which no context supports: nothing to verify
    if not entry.contexts:
        return "gold_ids: no reference contexts, so nothing to check the reference against or to retrieve"
    if verify is None:
        return None
    reason = verify(entry.ground_truth, entry.contexts)
    return f"grounding: {reason}" if reason else None


def _golden_row(entry: _Entry, generator: str) -> dict:
    gold = entry.question_type != UNANSWERABLE
    return {
        "qa_id": entry.qa_id,
        "question": entry.question,
        "ground_truth": entry.ground_truth,
        "gold_chunk_ids": list(entry.context_ids) if gold else [],
        "gold_contexts": list(entry.contexts) if gold else [],
        "question_type": entry.question_type,
        "source_cluster": -1,  # not clustered
        "source_chunk_ids": list(entry.context_ids),
        "generator": generator,
        "prompt_version": "",
        "template": entry.synthesizer,  # the RAGAS synthesizer that wrote it, if it says
        "topic": "",
        "round_trip_rank": -1,  # not measured: the import runs no retriever
        "grounded": True,  # verified, or taken as given (the manifest's source says which)
        "quality_score": assess(entry.question, entry.question_type).score,
    }


def _rejected_row(entry: _Entry, generator: str, reason: str) -> dict:
    stage, _, why = reason.partition(": ")
    row = {column: value for column, value in _golden_row(entry, generator).items() if column in REJECTED_COLUMNS}
    return {**row, "stage": stage, "reason": f"{entry.where}: {why}"}


def _chunks(entries: list[_Entry]) -> pd.DataFrame:
    """One chunk per distinct context id, in the order the file names them; none for a text over
    MAX_FIELD_CHARS (its item is rejected: the audit's retriever is not to search it)."""
    texts: dict[str, str] = {}
    for entry in entries:
        texts.update(
            (chunk_id, text)
            for chunk_id, text in zip(entry.context_ids, entry.contexts)
            if chunk_id not in texts and len(text) <= MAX_FIELD_CHARS
        )
    positions: dict[str, int] = {}
    chunks = []
    for chunk_id, text in texts.items():
        doc_id = chunk_id.split("#")[0] if "#" in chunk_id else IMPORTED_DOC
        position = positions[doc_id] = positions.get(doc_id, -1) + 1
        chunks.append(Chunk(chunk_id, doc_id, position, "", 1, 1, text, count_tokens(text), sha256(text), PROSE))
    return pd.DataFrame([asdict(chunk) for chunk in chunks], columns=CHUNK_COLUMNS)


def _plan(entries: list[_Entry], kept: list[_Entry], peer: PeerFile) -> pd.DataFrame:
    """The synthesis plan's table for an imported set: the file's items per type, and those kept."""
    rows = []
    for question_type in QUESTION_TYPES:
        n = sum(e.question_type == question_type for e in entries)
        if n:
            kept_n = sum(e.question_type == question_type for e in kept)
            note = f"imported from {peer.path.name} ({peer.format})"
            rows.append(
                {
                    "question_type": question_type,
                    "requested": n,
                    "planned": n,
                    "generated": n,
                    "kept": kept_n,
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def _quoted(text: str) -> str:
    return repr(text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 1] + "…")


# ---- ours in a peer's format -----------------------------------------------------------------


def check_out_path(path: Path | str, format: str) -> None:
    """ValueError (one line) when the file's extension is not one the format is written as."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES[format]:
        raise ValueError(f"a {format} file is {' or '.join(SUFFIXES[format])}, not {Path(path).name}")


def golden_records(golden: pd.DataFrame, format: str) -> list[dict]:
    """The golden set's items as the format's records (our qa_id and question type kept beside them)."""
    return [_golden_record(item, format) for item in golden.to_dict("records")]


def _golden_record(item: dict, format: str) -> dict:
    question_type, qa_id = str(item["question_type"]), str(item["qa_id"])
    contexts, ids = _strings(item["gold_contexts"]), _strings(item["gold_chunk_ids"])
    if format == DEEPEVAL:
        metadata = {"qa_id": qa_id, "question_type": question_type, "gold_chunk_ids": ids}
        return {
            "input": str(item["question"]),
            "expected_output": str(item["ground_truth"]),
            "context": contexts,
            METADATA: metadata,
        }
    record = {
        "user_input": str(item["question"]),
        "reference_contexts": contexts,
        "reference_context_ids": ids,
        "reference": str(item["ground_truth"]),
    }
    if format == RAGAS_TESTSET:
        record["synthesizer_name"] = synthesizer_name(item)
    return {**record, "qa_id": qa_id, "question_type": question_type}


def synthesizer_name(item: dict) -> str:
    """The RAGAS synthesizer of an item: the one it was imported with, else the one for its type."""
    template, question_type = str(item.get("template") or ""), str(item["question_type"])
    if template and type_of_synthesizer(template) == question_type:
        return template
    return SYNTHESIZERS.get(question_type, OWN_SYNTHESIZER + question_type)


def evaluation_records(items: list[EvalItem], golden: pd.DataFrame, format: str) -> list[dict]:
    """An audit's answered items as RAGAS samples or DeepEval test cases: the question, the retrieved
    contexts with their ids in rank order, the candidate's answer, the reference and its gold contexts."""
    if format == RAGAS_TESTSET:
        raise ValueError("a RAGAS testset holds no answers: write an audit's rows as ragas or deepeval")
    by_id = {str(item["qa_id"]): item for item in golden.to_dict("records")}
    return [_evaluation_record(item, by_id[item.qa_id], format) for item in items]


def _evaluation_record(item: EvalItem, gold: dict, format: str) -> dict:
    contexts, ids = [str(c["text"]) for c in item.contexts], [str(c["id"]) for c in item.contexts]
    reference = _golden_record(gold, format)
    if format == DEEPEVAL:
        metadata = {**reference[METADATA], "retrieved_context_ids": ids}
        return {
            "input": item.question,
            "actual_output": item.answer,
            "expected_output": item.ground_truth,
            "retrieval_context": contexts,
            "context": reference["context"],
            METADATA: metadata,
        }
    return {
        "user_input": item.question,
        "retrieved_contexts": contexts,
        "retrieved_context_ids": ids,
        "response": item.answer,
        **{k: v for k, v in reference.items() if k != "user_input"},
    }


def write_records(records: list[dict], path: Path | str, format: str) -> WrittenFile:
    """The records as the format's file, written then renamed: .json (an array) or .jsonl, every text as it
    is; or .csv with list cells as Python's repr, as RAGAS's to_csv writes them, and every text cell that a
    spreadsheet would run as a formula after its text mark (how many: WrittenFile.marked)."""
    path = Path(path)
    check_out_path(path, format)
    suffix = path.suffix.lower()
    marked = 0
    if suffix == ".json":
        text = json.dumps(records, ensure_ascii=False, indent=2) + "\n"
    elif suffix == ".jsonl":
        text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    else:
        text, marked = _csv_text(records)
    return WrittenFile(atomic_write_text(path, text), marked)


def _csv_text(records: list[dict]) -> tuple[str, int]:
    """The CSV, and how many of its cells were marked as text."""
    columns = list(dict.fromkeys(key for record in records for key in record))
    rows = [{k: repr(v) if isinstance(v, list) else v for k, v in record.items()} for record in records]
    marked = 0
    for row in rows:
        for key, value in row.items():
            if isinstance(value, str) and (safe := as_spreadsheet_text(value)) != value:
                row[key], marked = safe, marked + 1
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue(), marked


def _strings(value) -> list[str]:
    """Parquet gives list columns back as numpy arrays."""
    if value is None:
        return []
    return [str(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
