"""The service runs a tenant's `rag-eval` commands as the CLI would, in a child process of its own.

Each command runs in a fresh child that never ran another; a few children are started ahead of their
command (child.py), so a gate does not wait for Dagster's imports. The child gets `--tenant` from the
verified token, the service's credentials (never the caller's), the caller's files in a private
folder, and nothing of the service's token machinery: without
RAG_EVAL_SERVER it opens the stores itself, and without the signing key it cannot mint a token. What
it prints and its exit status go back to the caller as they are, so a command through the service says
exactly what the same command says on the operator's machine. A semaphore bounds how many run at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# What a child must not inherit: it must neither call the service back nor sign tokens.
WITHHELD_VARIABLES = ("RAG_EVAL_SERVER", "RAG_EVAL_TOKEN", "RAG_EVAL_TOKEN_KEY_FILE")
FINISHED, RUNNING, QUEUED = "finished", "running", "queued"
CHILD_MODULE = "rag_eval_pipeline.service.child"
logger = logging.getLogger(__name__)
KEPT_FINISHED_JOBS = 1000  # finished jobs remembered for late polls; older ones are forgotten first


@dataclass(frozen=True)
class File:
    """An argument that is the path of one of the command's files (an input the caller sent, or an output)."""

    name: str


@dataclass
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    files: dict[str, str]  # the output files the command wrote, by name


@dataclass
class Job:
    """One command a caller started: its tenant owns it, nobody else sees it."""

    id: str
    tenant: str
    state: str = QUEUED
    result: CommandResult | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class CommandRunner:
    """Runs `rag-eval` commands in child processes, at most `limit` at once, and keeps their jobs."""

    def __init__(
        self,
        limit: int,
        warm: int = 2,
        environ: Mapping[str, str] | None = None,
        timeout_s: float = 3 * 3600.0,
        hidden: Mapping[str, str] | None = None,
    ) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._timeout_s = timeout_s  # a child still running after this is killed: it would hold a slot for ever
        self._hidden = dict(hidden or {})  # the operator's paths in what a command prints, and what replaces them
        source = os.environ if environ is None else environ
        self._environ = {k: v for k, v in source.items() if k not in WITHHELD_VARIABLES}
        self._jobs: dict[str, Job] = {}
        self._tasks: set[asyncio.Task] = set()
        self._warm_wanted = warm
        self._warm: list[asyncio.subprocess.Process] = []
        self._warming: set[asyncio.Task] = set()  # children being started
        self._closed = False

    def warm_up(self) -> None:
        """Start children until `warm` wait for a command (each imports for seconds, in the background)."""
        for _ in range(0 if self._closed else self._warm_wanted - len(self._warm) - len(self._warming)):
            task = asyncio.get_running_loop().create_task(self._add_warm_child())
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    async def _add_warm_child(self) -> None:
        self._warm.append(await self._spawn())

    async def close(self) -> None:
        """End the waiting children: an empty standard input tells each to exit without running anything."""
        self._closed = True
        await asyncio.gather(*self._warming)
        while self._warm:
            child = self._warm.pop()
            if child.stdin is not None:
                child.stdin.close()
            await child.wait()

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD_MODULE,
            env=self._environ,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def _child(self) -> asyncio.subprocess.Process:
        """A warm child if one is waiting and alive, else a new one."""
        while self._warm:
            child = self._warm.pop(0)
            if child.returncode is None:
                return child
        return await self._spawn()

    def _background(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(
        self, args: list[str | File], inputs: Mapping[str, str], outputs: tuple[str, ...], shown: Mapping[str, str]
    ) -> CommandResult:
        """`rag-eval *args` with each input file written first; a File in args is that file's path.
        shown maps an input's name to how the caller knows it, so messages name the caller's file."""
        async with self._slots:  # the caller's files are written only once the command may run
            folder = Path(tempfile.mkdtemp(prefix="rag-eval-service-"))
            try:
                paths = {name: str(folder / name) for name in (*inputs, *outputs)}
                for name, text in inputs.items():
                    Path(paths[name]).write_text(text, encoding="utf-8")
                argv = [paths[arg.name] if isinstance(arg, File) else arg for arg in args]
                status, out, err = await self._run_child(argv)
                written = {
                    name: Path(paths[name]).read_text(encoding="utf-8")
                    for name in outputs
                    if Path(paths[name]).exists()
                }
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        self.warm_up()  # after the command, so a new child's imports do not slow this one down
        replaced = {**self._hidden, **{path: shown.get(name, name) for name, path in paths.items()}}
        return CommandResult(status, _decoded(out, replaced), _without_trace(_decoded(err, replaced)), written)

    async def _run_child(self, argv: list[str]) -> tuple[int, bytes, bytes]:
        child = await self._child()
        try:
            out, err = await asyncio.wait_for(
                child.communicate((json.dumps({"argv": argv}) + "\n").encode()), self._timeout_s
            )
        except TimeoutError:
            child.kill()
            await child.wait()
            message = f"error: the command did not finish within {self._timeout_s:.0f} s: the service stopped it\n"
            return 2, b"", message.encode()
        return (child.returncode if child.returncode is not None else 2), out, err

    def start(
        self, tenant: str, args: list[str | File], inputs: Mapping[str, str], outputs: tuple[str, ...], shown
    ) -> Job:
        """Run a command in the background; its job, to wait for or poll."""
        job = Job(uuid.uuid4().hex, tenant)
        self._forget_old_jobs()
        self._jobs[job.id] = job

        async def body() -> None:
            job.state = RUNNING
            try:
                job.result = await self.run(args, inputs, outputs, shown)
            except Exception as error:  # the service stays up: the caller gets the failure as its result
                job.result = CommandResult(2, "", f"error: the service could not run the command: {error}\n", {})
            job.state = FINISHED
            job.done.set()

        self._background(body())
        return job

    def _forget_old_jobs(self) -> None:
        finished = [job_id for job_id, job in self._jobs.items() if job.state == FINISHED]  # oldest first
        for job_id in finished[: max(0, len(finished) - KEPT_FINISHED_JOBS)]:
            del self._jobs[job_id]

    def active(self, tenant: str) -> int:
        """The tenant's jobs queued or running."""
        return sum(1 for job in self._jobs.values() if job.tenant == tenant and job.state != FINISHED)

    def job(self, tenant: str, job_id: str) -> Job | None:
        """The tenant's job of that id; None for another tenant's (indistinguishable from none)."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.tenant == tenant else None


def _decoded(raw: bytes, replaced: Mapping[str, str]) -> str:
    text = raw.decode("utf-8", errors="backslashreplace")
    for path, shown in replaced.items():
        text = text.replace(path, shown)
    return text


def _without_trace(stderr: str) -> str:
    """A crashed command's stack trace stays in the service's log; the caller gets its one `error:` line."""
    if "Traceback (most recent call last)" not in stderr:
        return stderr
    logger.error("a command crashed:\n%s", stderr)
    return "".join(line for line in stderr.splitlines(keepends=True) if line.startswith("error: "))
