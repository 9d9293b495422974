"""Running a candidate RAG pipeline over the golden set.

A candidate is a callable `question -> {"answer": str, "contexts": [{"id", "text"}, ...]}` (contexts
in rank order), named `module:function`, or precomputed outputs: a JSONL file where the run is launched,
submitted to the tenant's results store before the run (evaluation/submissions.py), which then audits
them by their submission id. A `CandidateSpec` says which; it is the one reader of the text form the
asset, the CLI and the manifests take. A candidate that raises, times out or returns a malformed output
fails that item only; the run goes on.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, StrictStr, ValidationError

from rag_eval_pipeline import settings
from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.jsonl import JsonLine, iter_json_lines
from rag_eval_pipeline.core.judging.results import OK  # the one "ok" status, of an output as of a score
from rag_eval_pipeline.core.text import field_text, scorable_text
from rag_eval_pipeline.stores.protocols import SUBMISSION_ID

CandidatePipeline = Callable[[str], dict]

FAILED = "failed"  # a candidate output the candidate did not give (it raised, hung or answered malformed)

REFERENCE = "reference"
CandidateKind = Literal["reference", "entry_point", "outputs_file", "submitted_outputs"]
OUTPUTS_SUFFIX = ".jsonl"
# The text form of submitted outputs: '-' is in no Python name, so it never reads as an entry point.
SUBMITTED_PREFIX = "submitted-outputs:"
# 'package.module:function', the function possibly a dotted attribute path ('os:path.join').
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_ENTRY = re.compile(rf"^{_DOTTED}:{_DOTTED}$")


class CandidateError(ValueError):
    """The candidate itself cannot be used (bad entry point, unreadable outputs file)."""


@dataclass(frozen=True)
class CandidateSpec:
    """Which candidate to audit: the shipped reference, code named 'package.module:function', a JSONL file
    of precomputed outputs, or such outputs once submitted ('submitted-outputs:<id>', what a run audits).
    `str(spec)` is its text form and `CandidateSpec.parse` reads it back."""

    kind: CandidateKind
    value: str = ""  # the entry point, the outputs file's path or the submission id; empty for the reference

    def __post_init__(self) -> None:
        if self.kind not in get_args(CandidateKind):
            raise CandidateError(
                f"unknown candidate kind {self.kind!r}: expected one of {', '.join(get_args(CandidateKind))}"
            )
        if self.kind == REFERENCE and self.value:
            raise CandidateError(f"the reference candidate takes no value, got {self.value!r}")
        if self.kind == "entry_point" and not (isinstance(self.value, str) and _ENTRY.fullmatch(self.value)):
            raise CandidateError(f"invalid entry {self.value!r}: must look like 'package.module:function'")
        if self.kind == "entry_point" and self.value.endswith(OUTPUTS_SUFFIX):
            # Its text form would read back as an outputs file, skipping the checks an outputs file gets.
            raise CandidateError(f"invalid entry {self.value!r}: a function name may not end in {OUTPUTS_SUFFIX}")
        if self.kind == "outputs_file" and not (isinstance(self.value, str) and self.value.endswith(OUTPUTS_SUFFIX)):
            raise CandidateError(f"invalid outputs {self.value!r}: expected a path to a {OUTPUTS_SUFFIX} file")
        if self.kind == "submitted_outputs" and not (
            isinstance(self.value, str) and SUBMISSION_ID.fullmatch(self.value)
        ):
            raise CandidateError(f"invalid submission id {self.value!r}: expected 32 lowercase hex digits")

    @classmethod
    def parse(cls, text: str) -> CandidateSpec:
        """'reference', 'submitted-outputs:<id>', a path ending in .jsonl, or 'package.module:function';
        CandidateError otherwise."""
        if text == REFERENCE:
            return cls(REFERENCE)
        if isinstance(text, str) and text.startswith(SUBMITTED_PREFIX):
            return cls("submitted_outputs", text.removeprefix(SUBMITTED_PREFIX))
        if isinstance(text, str) and text.endswith(OUTPUTS_SUFFIX):
            return cls("outputs_file", text)
        if isinstance(text, str) and _ENTRY.fullmatch(text):
            return cls("entry_point", text)
        raise CandidateError(
            f"invalid candidate {text!r}: expected 'reference', 'package.module:function' "
            f"or a path to a {OUTPUTS_SUFFIX} outputs file"
        )

    @classmethod
    def entry(cls, text: str) -> CandidateSpec:
        """What may run code: 'reference' or 'package.module:function', never an outputs file."""
        return cls(REFERENCE) if text == REFERENCE else cls("entry_point", text)

    @classmethod
    def outputs_beside(cls, folder: Path, name: str) -> CandidateSpec:
        """An outputs file named relative to folder, which it must stay inside (links resolved) and exist in,
        under its one name.

        A manifest dropped in a folder must not make the audit read files elsewhere on the host: not
        through a symbolic link, nor through a hard link, a second name for a file anywhere on the file system.
        """
        if not isinstance(name, str) or not name.endswith(OUTPUTS_SUFFIX):
            raise CandidateError(f"invalid outputs {name!r}: expected a path to a {OUTPUTS_SUFFIX} file")
        folder = Path(folder).resolve()
        resolved = (folder / name).resolve()
        if not resolved.is_relative_to(folder):
            raise CandidateError(
                f"outputs {name!r} is outside the manifests folder {folder}: put the file beside the manifest"
            )
        if not resolved.is_file():
            raise CandidateError(f"outputs file {resolved} does not exist")
        names = os.stat(resolved).st_nlink
        if names > 1:
            raise CandidateError(
                f"outputs {name!r} is a hard link (one of {names} names of a file that may be anyone's): "
                "put a copy of its own beside the manifest"
            )
        return cls("outputs_file", str(resolved))

    def __str__(self) -> str:
        if self.kind == "submitted_outputs":
            return SUBMITTED_PREFIX + self.value
        return REFERENCE if self.kind == REFERENCE else self.value

    def require_allowed(self) -> CandidateSpec:
        """self, unless it names code outside the packages RAG_EVAL_CANDIDATE_MODULES allows."""
        if self.kind == "entry_point":
            check_entry_allowed(self.value, allowed_entry_modules())
        return self


REFERENCE_SPEC = CandidateSpec(REFERENCE)


@dataclass(frozen=True)
class CandidateOutput:
    qa_id: str
    question: str
    answer: str
    contexts: list[dict]
    status: str
    error: str
    latency_s: float
    trace_id: str = ""  # of the item's span (core/tracing.py): where its trace is; "" when tracing is off
    span_id: str = ""


@contextmanager
def item_span(qa_id: str, question: str) -> Iterator[Callable[[CandidateOutput], CandidateOutput]]:
    """A golden question asked inside a span of its own (a candidate's own spans nest under it); yields
    `finish(output)`: the output with the span's ids, its answer and status recorded on the span."""
    with tracing.span(f"candidate {qa_id}", tracing.CHAIN, {"input.value": question, "rag_eval.qa_id": qa_id}) as item:

        def finish(output: CandidateOutput) -> CandidateOutput:
            context_ids = [str(c.get("id", "")) for c in output.contexts]
            tracing.set_attributes(
                item,
                {
                    "output.value": output.answer,
                    "rag_eval.status": output.status,
                    "rag_eval.error": output.error or None,
                    "rag_eval.context_ids": context_ids or None,
                },
            )
            trace_id, span_id = tracing.ids()
            return replace(output, trace_id=trace_id, span_id=span_id)

        yield finish


_MODULE = re.compile(rf"^{_DOTTED}$")


def allowed_entry_modules() -> tuple[str, ...]:
    """Packages a candidate manifest may name code in, from RAG_EVAL_CANDIDATE_MODULES (comma-separated).

    Unset or empty: none. A manifest is a file dropped in a folder, so by default it may only ask
    for the reference candidate or precomputed outputs, never to import and run code.
    """
    prefixes = settings.load().candidate_modules  # read at each check, so a changed environment applies
    for prefix in prefixes:
        if not _MODULE.fullmatch(prefix):
            raise CandidateError(
                f"{settings.CANDIDATE_MODULES_VARIABLE}: invalid module prefix {prefix!r}: expected 'package.module'"
            )
    return prefixes


def check_entry_allowed(spec: str, prefixes: tuple[str, ...]) -> str:
    """spec if its module is one of prefixes or inside one (by whole names: 'my_rag' allows 'my_rag.x', not 'my_ragx')."""
    module = spec.partition(":")[0]
    if not any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
        allowed = ", ".join(prefixes) or "none"
        raise CandidateError(
            f"entry {spec!r} is not in an allowed package (allowed: {allowed}; set {settings.CANDIDATE_MODULES_VARIABLE})"
        )
    return spec


def load_entry_point(entry: CandidateSpec | str) -> CandidatePipeline:
    """The callable an entry point names; CandidateError when it cannot be imported or called."""
    spec = entry if isinstance(entry, CandidateSpec) else CandidateSpec("entry_point", entry)
    if spec.kind != "entry_point":
        raise CandidateError(f"candidate {spec} is not an entry point")
    module_name, _, attribute = spec.value.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise CandidateError(
            f"cannot import candidate module {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise CandidateError(f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(target):
        raise CandidateError(f"candidate {spec.value!r} is not callable")
    return cast(CandidatePipeline, target)  # its replies are checked one by one (validate_output)


class _Context(BaseModel):
    id: Any = ""
    text: StrictStr


class _Output(BaseModel):
    """A candidate's answer and its contexts in rank order; other keys are ignored."""

    answer: StrictStr
    contexts: list[_Context] = []


def validate_output(raw: Any) -> tuple[str, list[dict]]:
    """(answer, contexts) from a candidate's return value, or ValueError saying what is wrong.

    Each text within the limit `rag-eval evaluate` applies (MAX_FIELD_CHARS), its lone surrogates
    read as U+FFFD (core.text.field_text): a pathological answer fails its item, not the run.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"candidate returned {type(raw).__name__}, expected a dict with 'answer' and 'contexts'")
    try:
        output = _Output.model_validate(raw)
    except ValidationError as error:
        raise ValueError(_output_problem(error.errors()[0]["loc"])) from None
    answer = field_text(output.answer, "answer")
    contexts = [
        {"id": scorable_text(str(c.id)), "text": field_text(c.text, f"context at rank {rank}")}
        for rank, c in enumerate(output.contexts)
    ]  # ranks counted as in _output_problem
    return answer, contexts


def _output_problem(where: tuple) -> str:
    """The first thing wrong, said in the candidate's terms rather than pydantic's."""
    if where[0] == "answer":
        return "'answer' must be a string"
    if len(where) == 1:
        return "'contexts' must be a list of {'id', 'text'} objects"
    return f"context at rank {where[1]} must be an object with a string 'text'"


def run_candidate(candidate: CandidatePipeline, items: list[dict], timeout_s: float = 30.0) -> list[CandidateOutput]:
    """Ask the candidate every golden question, one at a time, each bounded by `timeout_s`."""
    outputs = []
    for item in items:
        with item_span(item["qa_id"], item["question"]) as finish:
            outputs.append(finish(_ask(candidate, item["qa_id"], item["question"], timeout_s)))
    return outputs


def _ask(candidate: CandidatePipeline, qa_id: str, question: str, timeout_s: float) -> CandidateOutput:
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = candidate(question)
        except BaseException as error:  # the candidate's own bug must not end the run
            outcome["error"] = f"{type(error).__name__}: {error}"

    started = time.perf_counter()
    # A daemon thread per call: a hung candidate is abandoned, not waited for. It runs in this context, so the
    # spans it makes nest under its item's.
    worker = threading.Thread(target=contextvars.copy_context().run, args=(call,), daemon=True)
    worker.start()
    worker.join(timeout_s)
    latency = round(time.perf_counter() - started, 4)
    if worker.is_alive():
        return CandidateOutput(qa_id, question, "", [], FAILED, f"timed out after {timeout_s:g} s", latency)
    if "error" in outcome:
        return CandidateOutput(
            qa_id, question, "", [], FAILED, scorable_text(f"candidate raised {outcome['error']}"), latency
        )
    try:
        answer, contexts = validate_output(outcome.get("value"))
    except ValueError as error:
        return CandidateOutput(qa_id, question, "", [], FAILED, f"malformed output: {error}", latency)
    return CandidateOutput(qa_id, question, answer, contexts, OK, "", latency)


MAX_OUTPUTS_BYTES = 64 * 2**20  # one submission's outputs: far above any golden set's size
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # not str.splitlines: it also breaks at U+2028 inside a JSON string


def outputs_text(path: Path | str) -> str:
    """An outputs file's records as ASCII JSON lines: what is submitted to the results store before the run
    (submissions.submit_outputs_file), so the worker that audits it needs nothing from this machine's disk.

    CandidateError for a file that cannot be read, a line that is not a JSON object, or a file without one
    usable record: an audit of nothing must not come out as a verdict.
    """
    path = Path(path)
    if not path.is_file():
        raise CandidateError(f"candidate outputs file {path} does not exist")
    if path.stat().st_size > MAX_OUTPUTS_BYTES:
        raise CandidateError(f"candidate outputs file {path} is larger than {MAX_OUTPUTS_BYTES // 2**20} MiB")
    return _checked_text(list(iter_json_lines(path)), str(path), f"candidate outputs file {path}")


def records_text(records: str | Iterable[Mapping[str, Any]]) -> str:
    """Outputs given in memory (JSON Lines text, or the records themselves, as a service receives them) as
    ASCII JSON lines, under the rules and the size limit of an outputs file; CandidateError otherwise."""
    if isinstance(records, str):
        if len(records.encode("utf-8", "surrogatepass")) > MAX_OUTPUTS_BYTES:
            raise CandidateError(f"the submission is larger than {MAX_OUTPUTS_BYTES // 2**20} MiB")
        lines = _text_lines(records)
    else:
        lines = [_object_line(number, record) for number, record in enumerate(records, start=1)]
    text = _checked_text(lines, "submission", "the submission")
    if len(text) > MAX_OUTPUTS_BYTES:  # ASCII: one byte per character
        raise CandidateError(f"the submission is larger than {MAX_OUTPUTS_BYTES // 2**20} MiB")
    return text


def _text_lines(text: str) -> list[JsonLine]:
    lines = []
    for number, raw in enumerate(_LINE_BREAK.split(text), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            lines.append(JsonLine(number, None, "not valid JSON"))
            continue
        lines.append(_object_line(number, value))
    return lines


def _object_line(number: int, value: Any) -> JsonLine:
    if not isinstance(value, Mapping):
        return JsonLine(number, None, f"expected a JSON object, got {type(value).__name__}")
    return JsonLine(number, dict(value))


def _checked_text(lines: list[JsonLine], where: str, what: str) -> str:
    """The records as ASCII JSON lines, once each is an object and one of them is usable."""
    for line in lines:
        if line.record is None:
            raise CandidateError(f"{where} line {line.number}: {line.problem}")
    _require_a_usable_record(what, lines)
    try:
        # ensure_ascii: no raw line separator inside a string, so the text splits back at "\n" exactly.
        return "\n".join(json.dumps(line.record, ensure_ascii=True) for line in lines)
    except (TypeError, ValueError) as error:  # records given in memory may hold what JSON cannot
        raise CandidateError(f"{where}: a record is not JSON ({error})") from None


def _require_a_usable_record(what: str, lines: list[JsonLine]) -> None:
    if not lines:
        raise CandidateError(
            f"{what} holds no records: expected one JSON object per line "
            "with 'qa_id' (or 'question'), 'answer' and 'contexts'"
        )
    problems = []
    for line in lines:
        try:
            _usable(line.record or {})  # every record is an object by now (_checked_text)
            return
        except ValueError as error:
            problems.append(f"line {line.number}: {error}")
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    raise CandidateError(f"{what} has no usable record: {shown}")


def _usable(record: dict) -> tuple[str, list[dict]]:
    """validate_output's (answer, contexts) for an outputs file's record, which must also say which question it answers."""
    key = _key(record)
    if not (key and isinstance(key, (str, int))):
        raise ValueError("no 'qa_id' or 'question' to match it to a golden question")
    question = record.get("question")
    if isinstance(question, str):
        field_text(question, "question")  # an echo over the limit is as suspect as an answer over it
    return validate_output(record)


def _key(record: dict) -> Any:
    return record.get("qa_id") or record.get("question")


def outputs_from_text(text: str, items: list[dict]) -> list[CandidateOutput]:
    """Precomputed outputs (outputs_text's or records_text's lines), matched to golden items by `qa_id`
    (or question)."""
    by_key: dict[str, Any] = {}
    for line in text.split("\n"):
        if line:
            record = json.loads(line)
            by_key[str(_key(record))] = record
    outputs = []
    for item in items:
        record = by_key.get(item["qa_id"], by_key.get(item["question"]))
        if record is None:
            outputs.append(
                CandidateOutput(
                    item["qa_id"], item["question"], "", [], FAILED, "no output in the file for this item", 0.0
                )
            )
            continue
        try:
            answer, contexts = _usable(record)
        except ValueError as error:
            outputs.append(
                CandidateOutput(item["qa_id"], item["question"], "", [], FAILED, f"malformed output: {error}", 0.0)
            )
            continue
        outputs.append(CandidateOutput(item["qa_id"], item["question"], answer, contexts, OK, "", 0.0))
    return outputs
