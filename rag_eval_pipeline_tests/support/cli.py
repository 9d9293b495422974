"""`rag-eval` for the tests: in a subprocess, as CI runs it, or in the test's own process.

A subprocess pays for a fresh interpreter and its imports (Dagster, pandas, the embedding model: about
3 s of CPU on these machines) before the command does anything, and the gate and run tests start
dozens. The tests that check what a command decided (its verdict, exit status, output, what it wrote)
call `rag_eval` in process: the same `main` the console script calls, with the environment, the
standard streams and the signal handlers swapped for the call. Tests of what only a process shows use
`rag_eval_process`: a kill, a signal, what is imported at start, two gates at once, the console script
itself, all of stderr (in process, pytest takes Python warnings and library log records, so "one line
on stderr" is asserted on a process), a command that must not hang (in process there is no timeout).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
PROCESS_TIMEOUT_S = 600


def rag_eval_process(env: dict, *args: str, timeout: float = PROCESS_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`rag-eval args` in a subprocess with env; its status and output."""
    return subprocess.run([RAG_EVAL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def rag_eval(env: dict, *args: str) -> subprocess.CompletedProcess:
    """`rag-eval args` in this process, with env as its whole environment; its status and output."""
    from rag_eval_pipeline.cli import main

    # Encoded as a process's streams are: a lone surrogate printed to stdout fails as it would there.
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    with _environment(env), _signal_handlers(), redirect_stdout(stdout), redirect_stderr(stderr):
        status = main(list(args))
    return subprocess.CompletedProcess([RAG_EVAL, *args], status, _text(stdout), _text(stderr))


def _text(stream: io.TextIOWrapper) -> str:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


@contextmanager
def _environment(env: dict):
    """os.environ is env while the block runs, then what it was (a subprocess would see env alone)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _signal_handlers():
    """SIGINT and SIGTERM as they were: main and every in-process Dagster run set them for a process that
    ends right after, and the test's process goes on."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
