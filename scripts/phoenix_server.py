"""Phoenix, the trace viewer, as a component of its own: its virtual environment, start, stop, status.

    .venv/bin/python scripts/phoenix_server.py install    # .phoenix-venv with arize-phoenix pinned (once, minutes)
    .venv/bin/python scripts/phoenix_server.py start [--port 6006] [--grpc-port 4317] [--working-dir DIR]
                                                     [--database-url postgresql://...] [--foreground]
    .venv/bin/python scripts/phoenix_server.py stop | status
    make traces          # install, then start in the background; make traces-down stops it

Phoenix's server (`arize-phoenix`) needs SQLAlchemy >= 2.1, which dagster-postgres's pin rules out, so it
never enters the project's environment: `install` makes `.phoenix-venv` beside the checkout with
`arize-phoenix[pg]` at PHOENIX_VERSION (the `pg` extra is asyncpg, for a Postgres database). The project's
environment holds only the client side (the OpenTelemetry SDK and its OTLP/HTTP exporter), which
`rag_eval_pipeline/core/tracing.py` uses.

`start` runs `phoenix serve` in a process group of its own, on 127.0.0.1 only: the HTTP port serves the UI,
the REST API and OTLP/HTTP at /v1/traces; the OTLP/gRPC port, which Phoenix 20 binds on every interface
(`[::]`), is bound on 127.0.0.1 too (the launcher below rewrites the address gRPC is asked for, and `start`
refuses a server that listens anywhere else). Data: SQLite under the working folder (default .phoenix), or
the Postgres database `--database-url` (or PHOENIX_SQL_DATABASE_URL) names: a database of Phoenix's own,
never the results database (a URL naming the database of RAG_EVAL_DATABASE_URL or
RAG_EVAL_DATABASE_ADMIN_URL is refused). It returns once /healthz answers, with the pid in the working folder;
`stop` ends that process group by its PID (SIGTERM, SIGKILL after a grace period), `status` says whether it
runs and answers (exit 0) or not (exit 3) and what it listens on. `--foreground` stays in the foreground as
Phoenix's supervisor, its log on the terminal, for a container or a service manager: Ctrl-C or SIGTERM stops it.
Phoenix's Prometheus endpoint (PHOENIX_ENABLE_PROMETHEUS) listens on every interface: it is refused.

Why a script and not a module of `rag_eval_pipeline`: the package is what teams install and CI runs; it
exports spans and never starts, installs or stops a trace server, and `rag-eval` has no command for one.
What starts Phoenix (`make traces`, the tests' session fixture in
`rag_eval_pipeline_tests/support/phoenix.py`, `benchmarks/trace_lookup.py`) works in a checkout, where
.phoenix-venv lives, and loads this file by its path. It uses the standard library only, so it runs under
any Python 3.10+, with or without the project installed.

Phoenix has no tenant isolation: whoever reaches its port sees every tenant's project. It is an operator's
tool; see docs/tracing.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHOENIX_VERSION = "20.26.1"
REQUIREMENT = f"arize-phoenix[pg]=={PHOENIX_VERSION}"
VENV = REPO / ".phoenix-venv"
STAMP_NAME = ".installed-stamp"  # holds the requirement installed; the Makefile's target is this file
WORKING_DIR = REPO / ".phoenix"
HOST = "127.0.0.1"
PORT, GRPC_PORT = 6006, 4317  # Phoenix's own defaults
START_TIMEOUT_S = 180.0  # a first start migrates the database; 10-60 s here
STOP_GRACE_S = 20.0
PROJECT_PREFIX = "rag-eval-"  # one Phoenix project per tenant: rag-eval-<tenant>
RESULTS_DATABASE_VARIABLES = ("RAG_EVAL_DATABASE_URL", "RAG_EVAL_DATABASE_ADMIN_URL")
# Settings this script decides; an operator's other PHOENIX_* variables (auth, TLS, ...) pass through.
OWN_SETTINGS = ("PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_GRPC_PORT", "PHOENIX_WORKING_DIR", "PHOENIX_SQL_DATABASE_URL")
# Defaults an operator may override: nothing from the internet (no telemetry pixels, web fonts or downloads),
# and no SQL of the migrations in the log.
QUIET_DEFAULTS = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_LOG_MIGRATIONS": "false",
}

# Run by .phoenix-venv's Python: default signal handlers (a shell that starts a job in the background hands
# it SIGINT ignored, and an ignored signal survives exec), gRPC bound on PHOENIX_HOST rather than on every
# interface, then `phoenix serve`.
LAUNCHER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
from grpc.aio import _server
host = os.environ["PHOENIX_HOST"]
def on_host(add):
    def bind(self, address, *rest):
        return add(self, host + ":" + address.rsplit(":", 1)[1], *rest)
    return bind
_server.Server.add_insecure_port = on_host(_server.Server.add_insecure_port)
_server.Server.add_secure_port = on_host(_server.Server.add_secure_port)
from phoenix.server.main import main
sys.argv = ["phoenix", "serve"]
sys.exit(main())
"""


# Phoenix is on loopback: never through a proxy an operator's http_proxy names.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PhoenixError(RuntimeError):
    """Phoenix could not be installed, started or reached; the message says why."""


# ---- the virtual environment -----------------------------------------------------------------------------


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def installed(venv: Path = VENV) -> bool:
    stamp = venv / STAMP_NAME
    return venv_python(venv).is_file() and stamp.is_file() and stamp.read_text().strip() == REQUIREMENT


def install(venv: Path = VENV, python: str = sys.executable) -> float | None:
    """Make the venv with REQUIREMENT unless it holds it already; the seconds it took, or None if nothing to do."""
    if installed(venv):
        return None
    began = time.monotonic()
    steps = [
        [python, "-m", "venv", str(venv)] if not venv_python(venv).is_file() else None,
        [str(venv_python(venv)), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(venv_python(venv)), "-m", "pip", "install", "--quiet", REQUIREMENT],
    ]
    for step in filter(None, steps):
        result = subprocess.run(step, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if result.returncode != 0:
            output = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            raise PhoenixError(f"`{' '.join(step)}` exited with {result.returncode}:\n{output}")
    (venv / STAMP_NAME).write_text(REQUIREMENT + "\n")
    return time.monotonic() - began


# ---- the database ------------------------------------------------------------------------------------------


def _database_identity(url: str) -> tuple[frozenset[str], int, str]:
    """Which server and database a URL reaches: the host's addresses (loopback, the unspecified address and
    a Unix socket all mean this machine), the port and the database name, decoded. Two URLs that differ only
    in spelling (`localhost.`, `::ffff:127.0.0.1`, `%72esults`, `?host=/run/postgresql`) are the same."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    host = urllib.parse.unquote(parts.hostname or query.get("host", [""])[0]).lower().rstrip(".")
    try:
        port = parts.port or int(query.get("port", ["5432"])[0])
    except ValueError:
        port = -1
    return _addresses(host), port, urllib.parse.unquote(parts.path.lstrip("/"))


def _addresses(host: str) -> frozenset[str]:
    if not host or host.startswith("/") or host == "localhost":
        return frozenset({"this machine"})
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return frozenset({host})  # unresolvable here: compared by name
    return frozenset("this machine" if _is_local(address) else address for address in resolved)


def _is_local(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def _same_database(a: str, b: str) -> bool:
    hosts_a, port_a, name_a = _database_identity(a)
    hosts_b, port_b, name_b = _database_identity(b)
    return port_a == port_b and name_a == name_b and bool(hosts_a & hosts_b)


def check_database_url(url: str, environ: dict[str, str] | None = None) -> str:
    """The URL, if it names a Postgres database of Phoenix's own; PhoenixError otherwise."""
    environ = dict(os.environ) if environ is None else environ
    scheme = urllib.parse.urlsplit(url).scheme.split("+")[0]
    if scheme not in ("postgresql", "postgres"):
        raise PhoenixError(f"Phoenix's database URL must be postgresql://...; got {redact(url)!r} (none: SQLite)")
    if not _database_identity(url)[2]:
        raise PhoenixError(f"Phoenix's database URL names no database: {redact(url)!r}")
    for variable in RESULTS_DATABASE_VARIABLES:
        results = environ.get(variable, "")
        if results and _same_database(results, url):
            raise PhoenixError(
                f"{redact(url)!r} is the results database ({variable}): give Phoenix a database of its own"
            )
    return url


def redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# ---- processes ---------------------------------------------------------------------------------------------


def _start_time(pid: int) -> int | None:
    """The process's start time from /proc (None when it is gone, or where /proc is missing)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])


def _alive(pid: int, started: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    now = _start_time(pid)
    if started is not None and now is not None and now != started:
        return False  # the PID was handed to another process
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    """Every live process of the process group (from /proc; [] where it is missing)."""
    members = []
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _leads_group(pid: int) -> bool:
    """Whether pid is a process group's id: its leader's, or one whose leader is gone but members are not."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return bool(group_members(pid))


def _address(hex_address: str) -> tuple[str, int]:
    """(ip, port) of a /proc/net/tcp{,6} address (the ip in 32-bit words of host order, little-endian here); an
    IPv4-mapped IPv6 address as the IPv4 address it maps."""
    ip, port = hex_address.split(":")
    raw = b"".join(bytes.fromhex(ip[i : i + 8])[::-1] for i in range(0, len(ip), 8))
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:  # gRPC's 127.0.0.1 is ::ffff:127.0.0.1
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """Every TCP address the process listens on, from its socket inodes and the kernel's tables (Linux)."""
    inodes = set()
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return set()
    for descriptor in descriptors:
        try:
            target = descriptor.readlink().name
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in (Path(f"/proc/{pid}/net/tcp"), Path(f"/proc/{pid}/net/tcp6")):
        if table.exists():
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    found.add(_address(fields[1]))
    return found


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((HOST, port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


# ---- the server --------------------------------------------------------------------------------------------


@dataclass
class PhoenixServer:
    """One `phoenix serve` on 127.0.0.1. `start()` returns once it answers; `stop()` ends its process group."""

    working_dir: Path = WORKING_DIR
    port: int = PORT
    grpc_port: int = GRPC_PORT
    database_url: str | None = None  # None: SQLite in working_dir
    venv: Path = VENV
    start_timeout_s: float = START_TIMEOUT_S
    host: str = field(default=HOST, init=False)
    startup_s: float | None = field(default=None, init=False)  # spawn to the first healthy answer
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def otlp_traces_endpoint(self) -> str:
        """Where an OTLP/HTTP exporter sends spans (OTEL_EXPORTER_OTLP_ENDPOINT is `url`: the SDK adds /v1/traces)."""
        return f"{self.url}/v1/traces"

    def trace_url(self, trace_id: str) -> str:
        """The UI's link to one trace by its id alone (Phoenix finds the project): what a report can hold."""
        return f"{self.url}/redirects/traces/{trace_id}"

    @property
    def log_path(self) -> Path:
        return self.working_dir / "phoenix.log"

    @property
    def pid_path(self) -> Path:
        return self.working_dir / "phoenix.pid"

    def environment(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        environ = dict(os.environ) if environ is None else dict(environ)
        dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", *OWN_SETTINGS)
        # OTEL_*: the operator's exporter settings are the pipeline's; Phoenix would trace itself with them.
        env = {k: v for k, v in environ.items() if k not in dropped and not k.startswith("OTEL_")}
        env = {**QUIET_DEFAULTS, **env}
        env.update(
            PHOENIX_HOST=self.host,
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=str(self.working_dir),
        )
        if self.database_url:
            env["PHOENIX_SQL_DATABASE_URL"] = check_database_url(self.database_url, environ)
        if env.get("PHOENIX_ENABLE_PROMETHEUS", "").strip().lower() not in ("", "false"):
            # Phoenix serves its metrics on [::]:9090, every interface, whatever PHOENIX_HOST says.
            raise PhoenixError("PHOENIX_ENABLE_PROMETHEUS would listen on every interface (port 9090): unset it")
        return env

    def command(self) -> list[str]:
        return [str(venv_python(self.venv)), "-c", LAUNCHER]

    def _prepare(self) -> dict[str, str]:
        if not installed(self.venv):
            raise PhoenixError(f"Phoenix is not installed in {self.venv}: `python {__file__} install` (make traces)")
        for port in {self.port, self.grpc_port}:
            if _port_taken(port):
                raise PhoenixError(f"port {port} on {self.host} is taken by another program")
        env = self.environment()
        self.working_dir.mkdir(parents=True, exist_ok=True)
        return env

    def _write_pid(self, pid: int) -> None:
        record = {
            "pid": pid,
            "started": _start_time(pid),
            "url": self.url,
            "port": self.port,
            "grpc_port": self.grpc_port,
            "database": redact(self.database_url) if self.database_url else "sqlite",
        }
        self.pid_path.write_text(json.dumps(record) + "\n")

    def start(self, foreground: bool = False) -> PhoenixServer:
        """Start; returns once /healthz answers and every port it listens on is on loopback (PhoenixError, and
        nothing left running, if not). Its log goes to the working folder, or to this terminal in the
        foreground (then `supervise()` keeps this process as its supervisor)."""
        env = self._prepare()
        began = time.monotonic()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command(),
                cwd=self.working_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=None if foreground else log,
                stderr=None if foreground else subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals all of it
            )
        self._write_pid(self._process.pid)
        try:
            self._wait_healthy(began)
            self._check_loopback_only()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def supervise(self) -> int:
        """Stay until Phoenix ends (`stop` from elsewhere: its exit code), or until Ctrl-C here (or SIGTERM,
        after `interrupt_on_sigterm`), which stops it (0)."""
        process = self._process
        assert process is not None, "start(foreground=True) first"
        try:
            _print_started(self, foreground=True)
            return process.wait()
        except KeyboardInterrupt:
            self.stop()
            return 0
        finally:
            self.pid_path.unlink(missing_ok=True)

    def healthy(self, timeout_s: float = 2.0) -> bool:
        try:
            with _OPENER.open(f"{self.url}/healthz", timeout=timeout_s) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _wait_healthy(self, began: float) -> None:
        process = self._process
        assert process is not None
        deadline = began + self.start_timeout_s
        while not self.healthy():
            if process.poll() is not None:
                raise PhoenixError(f"phoenix serve exited with {process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise PhoenixError(
                    f"Phoenix did not answer at {self.url}/healthz within {self.start_timeout_s:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def _check_loopback_only(self) -> None:
        pid = self.pid
        if pid is None or not Path(f"/proc/{pid}/net/tcp").exists():
            return  # no /proc here (not Linux): nothing to read it from
        wide = sorted(a for a in listening_addresses(pid) if not ipaddress.ip_address(a[0]).is_loopback)
        if wide:
            raise PhoenixError(f"Phoenix listens beyond loopback on {wide}; stopped it")

    @property
    def pid(self) -> int | None:
        """The running server's pid: this object's child, or the one the pid file names."""
        if self._process is not None:
            return self._process.pid if self._process.poll() is None else None
        record = self.pid_record()
        if record and _alive(record["pid"], record.get("started")):
            return record["pid"]
        return None

    def pid_record(self) -> dict | None:
        try:
            return json.loads(self.pid_path.read_text())
        except (OSError, ValueError):
            return None

    @property
    def running(self) -> bool:
        return self.pid is not None

    def stop(self, grace_s: float = STOP_GRACE_S) -> bool:
        """SIGTERM its process group, SIGKILL what is left after grace_s; True if it was running."""
        pid = self.pid
        # The group of our own child even when its leader is gone (the group id outlives it while a member runs).
        pgid = self._process.pid if self._process is not None else pid
        if pgid is not None and _leads_group(pgid) and (pid is not None or group_members(pgid)):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while group_members(pgid) and time.monotonic() < deadline:
                if self._process is not None:
                    self._process.poll()  # reap the leader, or it lingers as a zombie of ours
                time.sleep(0.1)
            _signal_group(pgid, signal.SIGKILL)  # whatever is left of the group
        if self._process is not None:
            self._process.wait()
        self.pid_path.unlink(missing_ok=True)
        return pid is not None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # -- what the tests and the benchmark ask Phoenix -----------------------------------------------------

    def get_json(self, path: str, timeout_s: float = 10.0) -> dict:
        with _OPENER.open(f"{self.url}{path}", timeout=timeout_s) as response:
            return json.load(response)

    def projects(self) -> list[str]:
        return [project["name"] for project in self.get_json("/v1/projects?limit=1000")["data"]]

    def trace_spans(self, project: str, trace_id: str) -> list[dict]:
        """The spans of one trace in one project, from Phoenix's REST API ([] when none, or no such project)."""
        query = urllib.parse.urlencode({"trace_id": trace_id, "limit": 1000})
        try:
            return self.get_json(f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans?{query}")["data"]
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return []
            raise

    def wait_for_spans(self, project: str, trace_id: str, count: int, timeout_s: float = 30.0) -> list[dict]:
        """Poll until the trace has count spans in the project (Phoenix inserts what it receives in batches)."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.trace_spans(project, trace_id)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)


# ---- the command line --------------------------------------------------------------------------------------


def status(server: PhoenixServer) -> int:
    pid = server.pid
    record = server.pid_record() or {}
    report = {
        "running": pid is not None,
        "pid": pid,
        "healthy": pid is not None and server.healthy(),
        "url": record.get("url", server.url),
        "database": record.get("database"),
        "listening": sorted(f"{ip}:{port}" for ip, port in listening_addresses(pid)) if pid else [],
        "log": str(server.log_path),
    }
    print(json.dumps(report, indent=2))
    return 0 if report["healthy"] else 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Phoenix (the trace viewer) in its own venv, on 127.0.0.1")
    parser.add_argument("action", choices=("install", "start", "stop", "status"))
    parser.add_argument("--port", type=int, default=PORT, help="the UI, REST API and OTLP/HTTP (default 6006)")
    parser.add_argument("--grpc-port", type=int, default=GRPC_PORT, help="OTLP/gRPC (default 4317)")
    parser.add_argument("--working-dir", type=Path, default=WORKING_DIR, help="SQLite, pid and log (default .phoenix)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("PHOENIX_SQL_DATABASE_URL") or None,
        help="a Postgres database of Phoenix's own (default: PHOENIX_SQL_DATABASE_URL; unset: SQLite)",
    )
    parser.add_argument(
        "--foreground", action="store_true", help="start: stay in the foreground, Phoenix's log on this terminal"
    )
    arguments = parser.parse_args(argv)
    server = PhoenixServer(
        working_dir=arguments.working_dir.resolve(),
        port=arguments.port,
        grpc_port=arguments.grpc_port,
        database_url=arguments.database_url,
    )
    try:
        if arguments.action == "install":
            took = install()
            print(f"{REQUIREMENT} in {VENV}" + (f": installed in {took:.0f} s" if took else ": already installed"))
            return 0
        if arguments.action == "status":
            return status(server)
        if arguments.action == "stop":
            print("Phoenix: stopped" if server.stop() else "Phoenix: not running")
            return 0
        if server.running:
            print(f"Phoenix: already running (pid {server.pid}) at {server.url}")
            return 0
        if arguments.foreground:
            interrupt_on_sigterm()  # before Phoenix starts: a SIGTERM at any point must stop it too
        server.start(foreground=arguments.foreground)
        if arguments.foreground:
            return server.supervise()
    except PhoenixError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # while it started (start() stopped it) or just after: stopped either way
        server.stop()
        return 130
    _print_started(server, foreground=False)
    return 0


def interrupt_on_sigterm() -> None:
    """SIGTERM (what a service manager sends the script it started) raises KeyboardInterrupt, as Ctrl-C does:
    the script then stops Phoenix rather than dying and leaving it running."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _print_started(server: PhoenixServer, foreground: bool) -> None:
    database = redact(server.database_url) if server.database_url else f"SQLite in {server.working_dir}"
    log = "log: this terminal" if foreground else f"log {server.log_path}"
    stop = (
        "Ctrl-C, or scripts/phoenix_server.py stop"
        if foreground
        else "make traces-down (scripts/phoenix_server.py stop)"
    )
    print(
        f"Phoenix {PHOENIX_VERSION}: running (pid {server.pid}, ready in {server.startup_s:.0f} s, {log})\n"
        f"  UI and REST API  {server.url}   data: {database}\n"
        f"  send spans with  export OTEL_EXPORTER_OTLP_ENDPOINT={server.url}\n"
        f"  a trace by id    {server.url}/redirects/traces/<trace id>\n"
        "Every tenant's project is visible to whoever reaches this port: an operator's tool, never a tenant's.\n"
        f"Stop it: {stop}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
