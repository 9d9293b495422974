"""A candidate entry point run in a child process, so that nothing it does can end or stall the audit.

A candidate is someone else's code: it may call `os._exit`, crash the interpreter, leak memory or hang
forever. Run in the auditing process, `os._exit(0)` ended a gate with exit 0 and no verdict. Here the
candidate runs in a child Python process that answers one question at a time over a pipe:

- a question it raises on, or answers malformed, is a failed item (as before);
- a question it takes longer than the timeout on: the child is killed (not abandoned, as a thread
  would be), the item fails with "timed out", and the next question gets a fresh child;
- a child that ends while answering (os._exit, a crash, the OOM killer): the item fails saying how it
  ended, and the next question gets a fresh child. After MAX_CONSECUTIVE_DEATHS in a row the
  remaining questions are not asked (each would only end the same way, after a fresh start that may
  cost seconds) and fail with that reason.

A candidate that cannot be imported fails the audit (CandidateError), as in process. The protocol is
JSON lines: the child's own stdout is redirected to stderr, so a candidate's print() cannot corrupt it.
A child whose auditing process is gone (kill -9 of a gate) ends by itself: a hung candidate would
otherwise live on for ever, holding the gate's output pipes open.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.text import scorable_text
from rag_eval_pipeline.evaluation.candidates import FAILED, OK, CandidateError, CandidateOutput, item_span

STARTUP_TIMEOUT_S = 120.0  # importing a user's pipeline (models, clients) may take a while
MAX_CONSECUTIVE_DEATHS = 3
ORPHAN_CHECK_INTERVAL_S = 0.5
EXIT_FLUSH_TIMEOUT_MS = 2_000  # the most an ending child spends sending its spans
CLOSE_GRACE_S = 3.0  # how long a child asked to end has before it is killed (more than its flush)
ORPHANED_EXIT_CODE = 70  # read by nobody (the auditing process is gone); set apart from a candidate's own exits


@dataclass(frozen=True)
class _Reply:
    answer: str = ""
    contexts: tuple = ()
    error: str = ""  # why the item failed; empty when answered


class _ChildEnded(Exception):
    """The child process ended (or was killed) without replying."""


class CandidateProcess:
    """One child process serving an entry point; `ask` one question at a time. Use as a context manager."""

    def __init__(self, entry: str, startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.entry = entry
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, entry, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the candidate's logs go to ours
            env=_child_environment(),
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        assert self.process.stdin is not None and self.process.stdout is not None  # both are pipes
        self._to_child, self._from_child = self.process.stdin, self.process.stdout
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()
        try:
            ready = self._reply(startup_timeout_s)
        except (TimeoutError, _ChildEnded) as error:  # the entry point cannot be loaded: the audit cannot go on
            self.close()
            raise CandidateError(f"candidate {entry} could not be loaded in its own process: {error}") from None
        if "error" in ready:
            self.close()
            raise CandidateError(ready["error"])

    def ask(self, question: str, timeout_s: float) -> _Reply:
        # The item's span travels with the question: the candidate's own spans nest under it, in its project.
        request = {"question": question, "traceparent": tracing.traceparent(), "tenant": tracing.current_tenant()}
        try:
            self._to_child.write(json.dumps(request) + "\n")
            self._to_child.flush()
        except OSError:
            raise _ChildEnded(self._how_it_ended()) from None
        reply = self._reply(timeout_s)
        if "error" in reply:
            return _Reply(error=reply["error"])
        return _Reply(reply["answer"], tuple(reply["contexts"]))

    def _reply(self, timeout_s: float) -> dict:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            self.close()
            raise TimeoutError(f"timed out after {timeout_s:g} s") from None
        if line is None:
            raise _ChildEnded(self._how_it_ended())
        return json.loads(line)

    def _read_lines(self) -> None:
        for line in self._from_child:
            self._lines.put(line)
        self._lines.put(None)  # end of file: the child is gone

    def _how_it_ended(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.close()
            code = self.process.returncode
        cause = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return f"the candidate process ended ({cause}) without answering"

    def close(self, grace_s: float = 0.0) -> None:
        """End the child: asked to (its stdin closed, it flushes its spans and exits) within `grace_s`,
        then killed. A child that timed out gets no grace: it is hung."""
        if grace_s > 0 and self.process.poll() is None:
            try:
                self._to_child.close()
                self.process.wait(timeout=grace_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self._to_child, self._from_child):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self) -> CandidateProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_entry_point(entry: str, items: list[dict], timeout_s: float = 30.0) -> list[CandidateOutput]:
    """Ask the candidate at `entry` ('module:function') every golden question in a child process."""
    outputs: list[CandidateOutput] = []
    deaths = 0
    child: CandidateProcess | None = None
    try:
        for item in items:
            if deaths >= MAX_CONSECUTIVE_DEATHS:
                reason = f"not asked: the candidate process ended on the last {deaths} questions"
                outputs.append(_failed(item, reason, 0.0))
                continue
            child = child if child is not None and child.process.poll() is None else CandidateProcess(entry)
            with item_span(item["qa_id"], item["question"]) as finish:
                output, ended = _ask_one(child, item, timeout_s)
                outputs.append(finish(output))
            deaths = deaths + 1 if ended else 0
    finally:
        if child is not None:
            child.close(grace_s=CLOSE_GRACE_S)
    return outputs


def _ask_one(child: CandidateProcess, item: dict, timeout_s: float) -> tuple[CandidateOutput, bool]:
    """The item's output, and whether the child ended on its own while answering it (a timeout is the
    question's: the child is killed and replaced, as every question gets its full timeout)."""
    started = time.perf_counter()
    try:
        reply = child.ask(item["question"], timeout_s)
    except TimeoutError as error:
        return _failed(item, str(error), time.perf_counter() - started), False
    except _ChildEnded as ended:
        return _failed(item, str(ended), time.perf_counter() - started), True
    latency = round(time.perf_counter() - started, 4)
    if reply.error:
        return _failed(item, reply.error, latency), False
    return CandidateOutput(item["qa_id"], item["question"], reply.answer, list(reply.contexts), OK, "", latency), False


def _failed(item: dict, reason: str, latency: float) -> CandidateOutput:
    # The reason may quote the candidate's own exception text, lone surrogates and all: it is stored as UTF-8.
    return CandidateOutput(item["qa_id"], item["question"], "", [], FAILED, scorable_text(reason), round(latency, 4))


def _child_environment() -> dict[str, str]:
    """This process's environment, with its import path: the child imports the entry point as we would."""
    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


# --- the child -----------------------------------------------------------------------------------


def serve(entry: str, requests: Iterator[str], reply) -> None:
    """Load the entry point, say so, then answer each request line with one reply line."""
    from rag_eval_pipeline.evaluation.candidates import load_entry_point, validate_output

    try:
        candidate = load_entry_point(entry)
    except CandidateError as error:
        reply({"error": str(error)})
        return
    reply({"ready": True})
    for line in requests:
        reply(_answer(candidate, json.loads(line), validate_output))


def _answer(candidate, request: dict, validate_output) -> dict:
    """One reply: the answer and contexts, or the error; the candidate runs under the item's span."""
    try:
        with tracing.tenant_scope(request.get("tenant", "")), tracing.attached(request.get("traceparent", "")):
            raw = candidate(request["question"])
    except BaseException as error:
        return {"error": f"candidate raised {type(error).__name__}: {error}"}
    try:
        answer, contexts = validate_output(raw)
    except ValueError as error:
        return {"error": f"malformed output: {error}"}
    return {"answer": answer, "contexts": contexts}


def _exit_when_orphaned(parent_pid: int) -> None:
    """End this process once its parent is gone (it is then re-parented), whatever the candidate is doing."""
    while os.getppid() == parent_pid:
        time.sleep(ORPHAN_CHECK_INTERVAL_S)
    os._exit(ORPHANED_EXIT_CODE)


def _main(entry: str, parent_pid: int) -> None:
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    # The protocol keeps the real stdout; whatever the candidate prints goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def reply(message: dict) -> None:
        protocol.write(json.dumps(message, ensure_ascii=True) + "\n")
        protocol.flush()

    serve(entry, sys.stdin, reply)
    # The parent closed our stdin: the run is done. The candidate's spans leave in one batch, bounded, and
    # the process ends without waiting on threads the candidate may have left running.
    tracing.flush(EXIT_FLUSH_TIMEOUT_MS)
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
