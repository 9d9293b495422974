"""Entry-point candidates run in a child process: what the candidate does to its process fails items, never the audit.

Each test drives real child processes (the candidates in rag_eval_pipeline_tests/candidates.py), and
asserts what the runner recorded per item; nothing depends on how fast the machine is, except the one
timeout, whose candidate sleeps far longer than it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_eval_pipeline.automation.liveness import process_is_running, process_start
from rag_eval_pipeline.evaluation.candidate_process import MAX_CONSECUTIVE_DEATHS, CandidateProcess, run_entry_point
from rag_eval_pipeline.evaluation.candidates import FAILED, OK, CandidateError

REPO_ROOT = str(Path(__file__).resolve().parents[2])
CANDIDATES = "rag_eval_pipeline_tests.candidates"


@pytest.fixture(autouse=True)
def importable_test_candidates(monkeypatch):
    """The child imports the test candidates the way a user's package is imported: from the path."""
    monkeypatch.syspath_prepend(REPO_ROOT)


def _items(*questions: str) -> list[dict]:
    return [{"qa_id": f"q{i}", "question": question} for i, question in enumerate(questions)]


def test_a_candidate_that_ends_its_process_fails_its_items_and_the_caller_goes_on():
    outputs = run_entry_point(f"{CANDIDATES}:exits_the_process", _items("one?", "two?"), timeout_s=60)

    assert [o.status for o in outputs] == [FAILED, FAILED]
    assert outputs[0].error == "the candidate process ended (exit code 0) without answering"
    assert outputs[1].error == outputs[0].error  # a fresh child was started for the second question


def test_after_repeated_deaths_the_remaining_questions_are_not_asked():
    questions = [f"question {i}?" for i in range(MAX_CONSECUTIVE_DEATHS + 2)]
    outputs = run_entry_point(f"{CANDIDATES}:exits_the_process", _items(*questions), timeout_s=60)

    ended = [o for o in outputs if "ended (exit code 0)" in o.error]
    not_asked = [o for o in outputs if o.error.startswith("not asked")]
    assert len(ended) == MAX_CONSECUTIVE_DEATHS and len(not_asked) == 2
    assert all(o.status == FAILED for o in outputs)


def test_a_crash_on_some_questions_fails_only_those():
    long = "What does the incident response runbook say about paging the on-call engineer at night?"
    outputs = run_entry_point(
        f"{CANDIDATES}:exits_on_long_questions", _items("Short?", long, "Also short?"), timeout_s=60
    )

    assert [o.status for o in outputs] == [OK, FAILED, OK]
    assert outputs[1].error == "the candidate process ended (exit code 3) without answering"
    assert outputs[2].answer == "A short answer." and outputs[2].contexts == [
        {"id": "doc#0", "text": "A short answer."}
    ]


def test_sys_exit_and_printing_do_not_disturb_the_protocol():
    exited = run_entry_point(f"{CANDIDATES}:exits_via_sys_exit", _items("q?"), timeout_s=60)
    assert exited[0].status == FAILED and exited[0].error == "candidate raised SystemExit: 0"

    printed = run_entry_point(f"{CANDIDATES}:prints_and_answers", _items("q?"), timeout_s=60)
    assert printed[0].status == OK and printed[0].answer == "Printed, then answered."


def test_a_hung_candidate_is_killed_not_abandoned():
    with CandidateProcess(f"{CANDIDATES}:hangs") as child:
        pid = child.process.pid
        with pytest.raises(TimeoutError, match="timed out after 1 s"):
            child.ask("anything?", timeout_s=1)  # the candidate sleeps 30 s
        assert child.process.poll() is not None  # killed and reaped: nothing keeps running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

    outputs = run_entry_point(f"{CANDIDATES}:hangs", _items("q?"), timeout_s=1)
    assert outputs[0].status == FAILED and outputs[0].error == "timed out after 1 s"


def test_a_candidate_that_cannot_be_loaded_fails_the_audit_with_the_reason():
    with pytest.raises(CandidateError, match="cannot import candidate module 'no_such_module'"):
        run_entry_point("no_such_module:answer", _items("q?"), timeout_s=60)
    with pytest.raises(CandidateError, match="has no attribute 'missing'"):
        run_entry_point(f"{CANDIDATES}:missing", _items("q?"), timeout_s=60)


def test_the_child_imports_from_the_callers_import_path(monkeypatch, tmp_path):
    """The test candidates are importable only through this process's sys.path (the fixture), not from the
    working directory or the environment: the child must be given the caller's path to find them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    outputs = run_entry_point(f"{CANDIDATES}:no_retrieval", _items("q?"), timeout_s=60)
    assert outputs[0].status == OK and "999 units" in outputs[0].answer


def test_an_exception_text_with_a_lone_surrogate_is_stored_as_utf8(tmp_path):
    """The item fails with the candidate's message, which must still be writable (it lands in Parquet)."""
    from dataclasses import asdict

    import pandas as pd

    outputs = run_entry_point(f"{CANDIDATES}:raises_with_a_lone_surrogate", _items("q?"), timeout_s=60)

    assert outputs[0].status == FAILED and outputs[0].error == "candidate raised RuntimeError: index \ufffd offline"
    pd.DataFrame([asdict(o) for o in outputs]).to_parquet(tmp_path / "outputs.parquet")


_AUDITOR = """
import sys
from rag_eval_pipeline.evaluation.candidate_process import CandidateProcess
child = CandidateProcess(sys.argv[1])
print(child.process.pid, flush=True)
child.ask("anything?", timeout_s=3600)
"""


def test_a_child_whose_auditing_process_is_killed_ends_too():
    """kill -9 of a gate must not leave its candidate running: a hung one would never end, holding the
    gate's output pipes open and a CPU or GPU of the CI machine."""
    auditor = subprocess.Popen(
        [sys.executable, "-c", _AUDITOR, f"{CANDIDATES}:hangs_for_ever"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
    )
    assert auditor.stdout is not None
    child_pid = int(auditor.stdout.readline())
    started = process_start(child_pid)  # the run-liveness check: a zombie counts as gone, a reused pid too
    assert started is not None

    auditor.kill()
    auditor.wait(timeout=60)
    deadline = time.monotonic() + 120  # the child checks every half second; a loaded machine may be slow
    while process_is_running(child_pid, started) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert not process_is_running(child_pid, started), "the candidate process outlived the audit that started it"
    finally:
        if process_is_running(child_pid, started):
            os.kill(child_pid, signal.SIGKILL)
