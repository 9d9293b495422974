"""`rag-eval` for the tests: in a subprocess, as CI runs it, or in the test's own process.

A subprocess pays for a fresh interpreter and its imports (Dagster, pandas, the embedding model: about
3 s of CPU on these machines) before the command does anything, and the gate and run tests start
dozens. The tests that check what a command decided (its verdict, exit status, output, what it wrote)
call `rag_eval` in process: the same `main` the console script calls, with the environment and the
standard streams swapped for the call. Tests of what only a process shows (a kill, a signal, what is
imported at start, two gates at once, the console script itself) use `rag_eval_process`.
"""

from __future__ import annotations

import io
import os
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

    stdout, stderr = io.StringIO(), io.StringIO()
    with _environment(env), redirect_stdout(stdout), redirect_stderr(stderr):
        status = main(list(args))
    return subprocess.CompletedProcess([RAG_EVAL, *args], status, stdout.getvalue(), stderr.getvalue())


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
