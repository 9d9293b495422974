"""The whole production stack on one machine, for a try: `make production-up` and `make production-down`.

    .venv/bin/python scripts/production_stack.py up | down | status [--state DIR]

`up` needs a running Postgres on 127.0.0.1:5432 whose superuser it may use (RAG_EVAL_STACK_ADMIN_URL,
default postgresql://postgres@127.0.0.1:5432/postgres; that URL is used here only, never written out) and
`redis-server` on PATH. From the shipped configs (deploy/) it makes the results database (`rag-eval db
upgrade`: schema, roles, policies), a `dagster` login owning the `dagster` database, and starts the
broker's and the caches' Redis, SeaweedFS, the Dagster daemon, two Celery workers and the gate service,
each in a process group of its own. Everything it makes lives in the state folder (default .production/):
pids, logs/, data, generated passwords and keys (readable by their owner only), `env` (the operator's
variables) and `demo.token` (a CI token of tenant demo). Every program is named by its absolute path in
the virtual environment, so nothing depends on PATH. `down` stops what `up` started; `status` says what
runs (exit 0 when all of it, 3 otherwise). Running `up` again starts only what is not running.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
DEPLOY = REPO / "deploy"
BROKER_CONF = DEPLOY / "redis" / "broker.conf"
CACHE_CONF = DEPLOY / "redis" / "cache.conf"
WEED_OPTIONS = DEPLOY / "seaweedfs" / "server.options"
S3_IDENTITY = DEPLOY / "seaweedfs" / "s3.json"
DAGSTER_YAML = DEPLOY / "celery" / "dagster.yaml"
WORKER_YAML = DEPLOY / "celery" / "worker.yaml"
WORKSPACE = REPO / "workspace.yaml"
CONFIG_FILES = (BROKER_CONF, CACHE_CONF, WEED_OPTIONS, S3_IDENTITY, DAGSTER_YAML, WORKER_YAML, WORKSPACE)

ADMIN_URL = os.environ.get("RAG_EVAL_STACK_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
BUCKET = "rag-eval"  # s3.json grants Read, Write and List on this bucket only
SERVICE_PORT = 8765
DEMO_TENANT = "demo"
# (name, queues): the two workers of docs/production.md; the second never waits behind a large tenant.
WORKERS = (("general-1", "rag-eval-large,rag-eval-small"), ("small-1", "rag-eval-small"))
COMPONENTS = ("redis-broker", "redis-cache", "seaweedfs", "dagster-daemon", *(n for n, _ in WORKERS), "service")
STOP_GRACE_S = 20.0  # SeaweedFS's filer waits up to 15 s for its gRPC streams
START_TIMEOUT_S = 90.0


def conf_value(path: Path, name: str) -> str:
    """The value of a `name value` line of a Redis config, or of a `name=value` line of weed's options."""
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.replace("=", " ", 1).split() if path.suffix == ".options" else line.split()
        if len(words) >= 2 and words[0] == name:
            return words[1]
    raise KeyError(f"{path} sets no {name}")


BROKER_PORT = int(conf_value(BROKER_CONF, "port"))
CACHE_PORT = int(conf_value(CACHE_CONF, "port"))
S3_PORT = int(conf_value(WEED_OPTIONS, "s3.port"))
MASTER_PORT = int(conf_value(WEED_OPTIONS, "master.port"))


@dataclass(frozen=True)
class Stack:
    state: Path

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    def pid_file(self, name: str) -> Path:
        return self.state / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The pid of a component this stack started, if it still runs (a reused pid is not taken for it)."""
        try:
            pid = int(self.pid_file(name).read_text())
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            return None
        return pid if _program(name) in command else None


def _program(name: str) -> str:
    """What the command line of a component's first process always holds."""
    if name.startswith("redis-"):
        return "redis-server"
    return {"seaweedfs": "weed", "dagster-daemon": "dagster-daemon", "service": "rag-eval"}.get(name, "dagster-celery")


# ---- secrets, environment ------------------------------------------------------------------------


def _private_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def load_secrets(stack: Stack) -> dict[str, str]:
    """Passwords and keys made on the first `up` and kept (the data they guard outlives a restart)."""
    path = stack.state / "secrets.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    made = {name: secrets.token_hex(20) for name in ("broker", "cache", "service_db", "worker_db", "dagster_db")}
    made["s3_access_key"] = "RAGEVAL" + secrets.token_hex(8).upper()
    made["s3_secret_key"] = secrets.token_urlsafe(30)
    _private_write(path, json.dumps(made, indent=2))
    return made


def _database_url(user: str, password: str, database: str) -> str:
    return f"postgresql://{user}:{quote(password)}@127.0.0.1:5432/{database}"


def environment(stack: Stack, keys: dict[str, str]) -> dict[str, str]:
    """The variables every process of the stack reads (the database role is set per process)."""
    return {
        "DAGSTER_HOME": str(stack.state / "dagster_home"),
        "DAGSTER_PG_URL": _database_url("dagster", keys["dagster_db"], "dagster"),
        "RAG_EVAL_DATABASE_URL": _database_url("rag_eval_service", keys["service_db"], "rag_eval"),
        "RAG_EVAL_OBJECT_STORE_URL": f"s3://{BUCKET}/tables",
        "RAG_EVAL_OBJECT_STORE_ENDPOINT": f"http://127.0.0.1:{S3_PORT}",
        "AWS_ACCESS_KEY_ID": keys["s3_access_key"],
        "AWS_SECRET_ACCESS_KEY": keys["s3_secret_key"],
        "RAG_EVAL_CACHE_URL": f"redis://:{keys['cache']}@127.0.0.1:{CACHE_PORT}/0",
        "RAG_EVAL_CELERY_BROKER_URL": f"redis://:{keys['broker']}@127.0.0.1:{BROKER_PORT}/0",
        "RAG_EVAL_CELERY_BACKEND_URL": f"redis://:{keys['broker']}@127.0.0.1:{BROKER_PORT}/1",
        "RAG_EVAL_DOCUMENTS_ROOT": str(REPO / "data" / "tenants"),
        "RAG_EVAL_LARGE_TENANTS": "acme",
        "RAG_EVAL_TOKEN_KEY_FILE": str(stack.state / "token.key"),
    }


def write_env_file(stack: Stack, variables: dict[str, str]) -> Path:
    lines = [
        "# The operator's variables of this stack (scripts/production_stack.py): `source` this file.",
        f'export PATH="{VENV_BIN}:$PATH"  # dagster-celery starts `celery` from PATH',
        *(f"export {name}={shlex.quote(value)}" for name, value in variables.items()),
        f"# A tenant's CI holds only: RAG_EVAL_SERVER=http://127.0.0.1:{SERVICE_PORT} RAG_EVAL_TOKEN=<its token>",
    ]
    path = stack.state / "env"
    _private_write(path, "\n".join(lines) + "\n")
    return path


def _process_env(variables: dict[str, str], **overrides: str) -> dict[str, str]:
    """The caller's environment without its own rag-eval or Dagster settings, plus the stack's."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_EVAL_", "DAGSTER_"))}
    path = f"{VENV_BIN}{os.pathsep}{inherited.get('PATH', '')}"
    return {**inherited, **variables, **overrides, "PATH": path}


# ---- the databases -------------------------------------------------------------------------------


def prepare_databases(keys: dict[str, str], variables: dict[str, str]) -> None:
    """The results database (`rag-eval db upgrade`), its logins' passwords, and Dagster's own login and
    database; all idempotent."""
    import psycopg2  # the production extra's driver

    admin = psycopg2.connect(ADMIN_URL)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'dagster'")
        verb = "ALTER" if cursor.fetchone() else "CREATE"
        cursor.execute(
            f"{verb} ROLE dagster LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s", [keys["dagster_db"]]
        )
        for database, owner in (("rag_eval", ""), ("dagster", " OWNER dagster")):
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database])
            if not cursor.fetchone():
                cursor.execute(f"CREATE DATABASE {database}{owner}")
    admin_url = urlsplit(ADMIN_URL)._replace(path="/rag_eval").geturl()
    _run([str(VENV_BIN / "rag-eval"), "db", "upgrade"], _process_env(variables, RAG_EVAL_DATABASE_ADMIN_URL=admin_url))
    with admin.cursor() as cursor:
        for role, key in (("rag_eval_service", "service_db"), ("rag_eval_worker", "worker_db")):
            cursor.execute(f"ALTER ROLE {role} PASSWORD %s", [keys[key]])
    admin.close()


def _run(argv: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"{Path(argv[0]).name} {' '.join(argv[1:3])} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


# ---- processes -----------------------------------------------------------------------------------


def start(stack: Stack, name: str, argv: list[str], env: dict[str, str], ready: str | int) -> None:
    """Start a component unless it runs; wait until it listens on port `ready` or logs the line `ready`."""
    if stack.pid(name):
        print(f"{name}: already running (pid {stack.pid(name)})")
        return
    if isinstance(ready, int) and _listening(ready):
        sys.exit(f"{name}: port {ready} is taken by another program")
    stack.logs.mkdir(parents=True, exist_ok=True)
    log = stack.logs / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    stack.pid_file(name).write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while process.poll() is None and time.monotonic() < deadline:
        if _listening(ready) if isinstance(ready, int) else ready in log.read_text(errors="replace"):
            break
        time.sleep(0.5)
    else:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        sys.exit(f"{name} did not start ({log}):\n{tail}\n(`make production-down` stops what did)")
    print(f"{name}: running (pid {process.pid}, log {log})")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _redis_conf(stack: Stack, name: str, shipped: Path, password: str) -> Path:
    """The shipped config, with this machine's data folder and a generated password (kept out of deploy/)."""
    data = stack.state / name
    data.mkdir(parents=True, exist_ok=True)
    path = stack.state / f"{name}.conf"
    _private_write(path, f"include {shipped}\ndir {data}\nrequirepass {password}\n")
    return path


def _seaweedfs(stack: Stack, keys: dict[str, str], env: dict[str, str]) -> None:
    folder = stack.state / "seaweedfs"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    identity = S3_IDENTITY.read_text(encoding="utf-8")
    identity = identity.replace("REPLACE_WITH_ACCESS_KEY_ID", keys["s3_access_key"])
    _private_write(folder / "s3.json", identity.replace("REPLACE_WITH_SECRET_ACCESS_KEY", keys["s3_secret_key"]))
    weed = str(VENV_BIN / "weed")
    argv = [weed, f"-logdir={stack.logs}", "server", f"-options={WEED_OPTIONS}", f"-dir={folder / 'data'}"]
    argv += [f"-s3.config={folder / 's3.json'}", f"-filer.localSocket={folder / 'filer.sock'}"]
    start(stack, "seaweedfs", [*argv, f"-s3.localSocket={folder / 's3.sock'}"], env, S3_PORT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # the bucket, once the master has a volume server and a filer
        made = subprocess.run(
            [weed, "shell", f"-master=127.0.0.1:{MASTER_PORT}"],
            input=f"s3.bucket.create -name {BUCKET}\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        if made.returncode == 0 or "already exists" in made.stderr:
            return
        if time.monotonic() > deadline:
            sys.exit(f"could not create bucket {BUCKET}: {made.stdout}{made.stderr}")
        time.sleep(1)


def _gate_service(stack: Stack, variables: dict[str, str]) -> None:
    """The gate service and a CI token of tenant demo, where this checkout's rag-eval has them."""
    rag_eval = str(VENV_BIN / "rag-eval")
    env = _process_env(variables)
    for command in (["serve"], ["token", "issue"]):
        if subprocess.run([rag_eval, *command, "--help"], env=env, capture_output=True).returncode:
            print(f"service: skipped (this rag-eval has no `{' '.join(command)}`)")
            return
    key = Path(variables["RAG_EVAL_TOKEN_KEY_FILE"])
    if not key.exists():
        _run([rag_eval, "token", "new-key", "--out", str(key)], env)
    start(stack, "service", [rag_eval, "serve", "--host", "127.0.0.1", "--port", str(SERVICE_PORT)], env, SERVICE_PORT)
    token = _run([rag_eval, "token", "issue", "--tenant", DEMO_TENANT, "--scope", "read,gate", "--ttl", "30d"], env)
    _private_write(stack.state / f"{DEMO_TENANT}.token", token.strip() + "\n")
    print(f"service: a CI token of tenant {DEMO_TENANT} (scopes read,gate) in {stack.state / (DEMO_TENANT + '.token')}")


def up(stack: Stack) -> int:
    missing = [str(p) for p in (*CONFIG_FILES, VENV_BIN / "rag-eval", VENV_BIN / "weed") if not p.exists()]
    redis_server = shutil.which("redis-server")
    if missing or not redis_server:
        sys.exit(f"missing: {', '.join(missing + ([] if redis_server else ['redis-server on PATH']))}")
    stack.state.mkdir(parents=True, exist_ok=True)
    stack.state.chmod(0o700)  # data, logs and generated secrets: the operator's only
    (stack.state / ".gitignore").write_text("*\n")  # secrets and data: never committed
    keys = load_secrets(stack)
    variables = environment(stack, keys)
    home = Path(variables["DAGSTER_HOME"])
    home.mkdir(exist_ok=True)
    shutil.copyfile(DAGSTER_YAML, home / "dagster.yaml")

    prepare_databases(keys, variables)
    plain = _process_env({})
    for name, shipped, key, port in (
        ("redis-broker", BROKER_CONF, "broker", BROKER_PORT),
        ("redis-cache", CACHE_CONF, "cache", CACHE_PORT),
    ):
        start(stack, name, [redis_server, str(_redis_conf(stack, name, shipped, keys[key]))], plain, port)
    _seaweedfs(stack, keys, plain)

    # The daemon and the workers run as the workers' role; the service and the operator as the service's.
    workers = _process_env(
        variables, RAG_EVAL_DATABASE_URL=_database_url("rag_eval_worker", keys["worker_db"], "rag_eval")
    )
    daemon = [str(VENV_BIN / "dagster-daemon"), "run", "-w", str(WORKSPACE)]
    start(stack, "dagster-daemon", daemon, workers, "Instance is configured with the following daemons")
    for name, queues in WORKERS:
        argv = [str(VENV_BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app"]
        argv += ["-y", str(WORKER_YAML), "-q", queues, "-n", name, "-l", "INFO"]  # INFO: it logs " ready."
        start(stack, name, argv, workers, " ready.")
    _gate_service(stack, variables)

    env_file = write_env_file(stack, variables)
    print(f"\nThe operator's variables: source {env_file}")
    print(
        f"Then: rag-eval register --tenant {DEMO_TENANT} --version v1 && rag-eval run --tenant {DEMO_TENANT} --version v1"
    )
    return 0


def down(stack: Stack) -> int:
    for name in reversed(COMPONENTS):
        pid = stack.pid(name)
        if pid:
            os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            while stack.pid(name) and time.monotonic() < deadline:
                time.sleep(0.2)
            try:  # what is left of its group (a Celery pool), or all of it after the grace period
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            print(f"{name}: stopped")
        stack.pid_file(name).unlink(missing_ok=True)
    return 0


def status(stack: Stack) -> int:
    running = {name: stack.pid(name) for name in COMPONENTS}
    for name, pid in running.items():
        print(f"{name}: {f'running (pid {pid})' if pid else 'stopped'}")
    return 0 if all(running.values()) else 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the production stack on one machine, for a try")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--state", type=Path, default=REPO / ".production", help="where pids, logs and data go")
    arguments = parser.parse_args(argv)
    stack = Stack(arguments.state.resolve())
    return {"up": up, "down": down, "status": status}[arguments.action](stack)


if __name__ == "__main__":
    sys.exit(main())
