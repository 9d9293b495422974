"""The gate service for the tests: the real `rag-eval serve` in its own process, on a free port.

`gate_service(env, log_path)` starts it with env (the operator's environment: stores, Dagster home, the
token key) and yields its URL once /openapi.json answers; the service's stderr (its audit log) goes
to log_path. `tokens` signs tokens with the same key, as `rag-eval token issue` does.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from rag_eval_pipeline.service.tokens import TokenPolicy, issue, new_key
from rag_eval_pipeline_tests.support.cli import RAG_EVAL
from rag_eval_pipeline_tests.support.postgres import free_port

START_TIMEOUT_S = 120.0
POLICY = TokenPolicy(issuer="rag-eval", audience="rag-eval-gate")


def write_key(path: Path) -> Path:
    path.write_text(new_key() + "\n")
    path.chmod(0o600)
    return path


def token_for(key_file: Path, tenant: str, scopes: tuple[str, ...] = ("read", "gate"), ttl_s: int = 3600) -> str:
    return issue(key_file.read_bytes().strip(), POLICY, tenant, scopes, ttl_s)


@contextmanager
def gate_service(env: dict, log_path: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        process = subprocess.Popen([RAG_EVAL, "serve", "--port", str(port)], env=env, stdout=log, stderr=log)
    try:
        _wait_until_up(process, url, log_path)
        yield url
    finally:
        process.send_signal(signal.SIGINT)  # uvicorn's graceful stop
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"rag-eval serve exited {process.returncode}: {log_path.read_text()}")
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"rag-eval serve did not answer within {START_TIMEOUT_S:.0f} s: {log_path.read_text()}")
