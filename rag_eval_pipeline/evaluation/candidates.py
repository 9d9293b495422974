"""Running a candidate RAG pipeline over the golden set.

A candidate is a callable `question -> {"answer": str, "contexts": [{"id", "text"}, ...]}` (contexts
in rank order), named `module:function`, or a JSONL file of precomputed outputs. A candidate that
raises, times out or returns a malformed output fails that item only; the run goes on.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rag_eval_pipeline.core.jsonl import read_json_lines

Candidate = Callable[[str], dict]

OK = "ok"
FAILED = "failed"


class CandidateError(ValueError):
    """The candidate itself cannot be used (bad entry point, unreadable outputs file)."""


@dataclass(frozen=True)
class CandidateOutput:
    qa_id: str
    question: str
    answer: str
    contexts: list[dict]
    status: str
    error: str
    latency_s: float


ALLOWED_MODULES_VARIABLE = "RAG_EVAL_CANDIDATE_MODULES"
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def allowed_entry_modules() -> tuple[str, ...]:
    """Packages a candidate manifest may name code in, from RAG_EVAL_CANDIDATE_MODULES (comma-separated).

    Unset or empty: none. A manifest is a file dropped in a folder, so by default it may only ask
    for the reference candidate or precomputed outputs, never to import and run code.
    """
    prefixes = tuple(p.strip() for p in os.environ.get(ALLOWED_MODULES_VARIABLE, "").split(",") if p.strip())
    for prefix in prefixes:
        if not _MODULE.fullmatch(prefix):
            raise CandidateError(f"{ALLOWED_MODULES_VARIABLE}: invalid module prefix {prefix!r}: expected 'package.module'")
    return prefixes


def check_entry_allowed(spec: str, prefixes: tuple[str, ...]) -> str:
    """spec if its module is one of prefixes or inside one (by whole names: 'my_rag' allows 'my_rag.x', not 'my_ragx')."""
    module = spec.partition(":")[0]
    if not any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
        allowed = ", ".join(prefixes) or "none"
        raise CandidateError(
            f"entry {spec!r} is not in an allowed package (allowed: {allowed}; set {ALLOWED_MODULES_VARIABLE})"
        )
    return spec


def load_entry_point(spec: str) -> Candidate:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise CandidateError(f"candidate entry point {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise CandidateError(f"cannot import candidate module {module_name!r}: {type(error).__name__}: {error}") from error
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise CandidateError(f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(target):
        raise CandidateError(f"candidate {spec!r} is not callable")
    return target


def validate_output(raw: Any) -> tuple[str, list[dict]]:
    """(answer, contexts) from a candidate's return value, or ValueError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError(f"candidate returned {type(raw).__name__}, expected a dict with 'answer' and 'contexts'")
    answer, contexts = raw.get("answer"), raw.get("contexts", [])
    if not isinstance(answer, str):
        raise ValueError("'answer' must be a string")
    if not isinstance(contexts, list):
        raise ValueError("'contexts' must be a list of {'id', 'text'} objects")
    cleaned = []
    for rank, context in enumerate(contexts):
        if not isinstance(context, dict) or not isinstance(context.get("text"), str):
            raise ValueError(f"context at rank {rank} must be an object with a string 'text'")
        cleaned.append({"id": str(context.get("id", "")), "text": context["text"]})
    return answer, cleaned


def run_candidate(candidate: Candidate, items: list[dict], timeout_s: float = 30.0) -> list[CandidateOutput]:
    """Ask the candidate every golden question, one at a time, each bounded by `timeout_s`."""
    return [_ask(candidate, item["qa_id"], item["question"], timeout_s) for item in items]


def _ask(candidate: Candidate, qa_id: str, question: str, timeout_s: float) -> CandidateOutput:
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = candidate(question)
        except BaseException as error:  # the candidate's own bug must not end the run
            outcome["error"] = f"{type(error).__name__}: {error}"

    started = time.perf_counter()
    # A daemon thread per call: a hung candidate is abandoned, not waited for.
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout_s)
    latency = round(time.perf_counter() - started, 4)
    if worker.is_alive():
        return CandidateOutput(qa_id, question, "", [], FAILED, f"timed out after {timeout_s:g} s", latency)
    if "error" in outcome:
        return CandidateOutput(qa_id, question, "", [], FAILED, f"candidate raised {outcome['error']}", latency)
    try:
        answer, contexts = validate_output(outcome.get("value"))
    except ValueError as error:
        return CandidateOutput(qa_id, question, "", [], FAILED, f"malformed output: {error}", latency)
    return CandidateOutput(qa_id, question, answer, contexts, OK, "", latency)


def read_outputs_file(path: Path, items: list[dict]) -> list[CandidateOutput]:
    """Precomputed outputs, one JSON object per line, matched to golden items by `qa_id` (or question)."""
    path = Path(path)
    if not path.is_file():
        raise CandidateError(f"candidate outputs file {path} does not exist")
    by_key: dict[str, Any] = {}
    try:
        records = read_json_lines(path)
    except ValueError as error:
        raise CandidateError(str(error)) from None
    for record in records:
        by_key[str(record.get("qa_id") or record.get("question"))] = record
    outputs = []
    for item in items:
        record = by_key.get(item["qa_id"], by_key.get(item["question"]))
        if record is None:
            outputs.append(CandidateOutput(item["qa_id"], item["question"], "", [], FAILED, "no output in the file for this item", 0.0))
            continue
        try:
            answer, contexts = validate_output(record)
        except ValueError as error:
            outputs.append(CandidateOutput(item["qa_id"], item["question"], "", [], FAILED, f"malformed output: {error}", 0.0))
            continue
        outputs.append(CandidateOutput(item["qa_id"], item["question"], answer, contexts, OK, "", 0.0))
    return outputs
