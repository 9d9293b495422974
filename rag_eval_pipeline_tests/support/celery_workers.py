"""Real Celery workers and a Dagster daemon on deploy/celery's configs, for tests.

`celery_cluster()` creates a Postgres database of its own for the Dagster instance, gives every process
(each worker, the daemon, the test) its own DAGSTER_HOME holding the same dagster.yaml, starts the
workers with `dagster-celery worker start` (each in its own working directory and TMPDIR, as on separate
machines) and `dagster-daemon run`, and on exit stops them, drops the database and deletes the Redis keys.
Redis is shared: every key this cluster makes carries a prefix of its own (kombu's `global_keyprefix`).

Runs are created and submitted in the test process, on an in-process copy of the same code location,
exactly as `dagster job launch` would: the daemon dequeues them and CeleryRunLauncher hands them to Celery.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import redis
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy" / "celery"
BIN = Path(sys.executable).parent
POSTGRES = dict(host="127.0.0.1", port=5432, user="postgres")
REDIS_URL = os.environ.get("RAG_EVAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PROBE_LOCATION = "celery_probe"
PROBE_MODULE = "rag_eval_pipeline_tests.test_celery.celery_job"
PROBE_JOB = "celery_probe_job"
CODE_LOCATIONS_BY_NAME = {"rag_eval_pipeline": "rag_eval_pipeline.definitions"}
RECORDS_VARIABLE = "RAG_EVAL_CELERY_TEST_RECORDS"  # where the probe job writes (see celery_job.py)
TIER_ENV = {"RAG_EVAL_LARGE_TENANTS": "acme,globex"}  # the tenants the tests treat as large
INSTANCE_VARIABLES = ("DAGSTER_PG_URL", "RAG_EVAL_CELERY_BROKER_URL", "RAG_EVAL_CELERY_BACKEND_URL")
START_TIMEOUT_S = 60.0


class ClusterError(RuntimeError):
    """A worker or the daemon did not start or stopped unexpectedly; the message quotes its log."""


@contextmanager
def fresh_database(prefix: str = "rag_eval_celery") -> Iterator[str]:
    """A new, empty Postgres database (dropped on exit); its URL."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = psycopg2.connect(dbname="postgres", **POSTGRES)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://{POSTGRES['user']}@{POSTGRES['host']}:{POSTGRES['port']}/{name}"
    finally:
        admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def cluster_instance_config(key_prefix: str, interval_s: int = 1) -> dict:
    """deploy/celery/dagster.yaml with the daemon's loops run every interval_s, and Redis keys prefixed."""
    config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text(encoding="utf-8"))
    config["run_coordinator"]["config"]["dequeue_interval_seconds"] = interval_s
    config["run_monitoring"]["poll_interval_seconds"] = interval_s
    config["run_launcher"]["config"]["config_source"] = _prefixed(
        config["run_launcher"]["config"].get("config_source"), key_prefix
    )
    return config


def cluster_worker_config(key_prefix: str) -> dict:
    """deploy/celery/worker.yaml with its Redis keys prefixed."""
    config = yaml.safe_load((DEPLOY / "worker.yaml").read_text(encoding="utf-8"))
    executor = config["execution"]["config"]
    executor["config_source"] = _prefixed(executor.get("config_source"), key_prefix)
    return config


def _prefixed(config_source: Mapping | None, key_prefix: str) -> dict:
    source = copy.deepcopy(dict(config_source or {}))
    for option in ("broker_transport_options", "result_backend_transport_options"):
        source.setdefault(option, {})["global_keyprefix"] = key_prefix
    return source


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path
    cwd: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def wait_for_log(self, needle: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.log_text():
            if self.popen.poll() is not None:
                raise ClusterError(f"{self.name} exited with {self.popen.returncode}:\n{self.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.name} not ready after {timeout_s:.0f} s:\n{self.log_text()[-3000:]}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL to the whole process group: the CLI wrapper, Celery's main process and its pool."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class CeleryCluster:
    root: Path
    env: dict[str, str]  # what every process of the cluster shares
    instance_config: dict
    worker_config: Path
    records: Path  # where the probe job writes its records
    key_prefix: str
    code_locations: dict[str, str]  # location name -> module, loaded by the daemon and the test process
    workers: dict[str, Process] = field(default_factory=dict)
    queues: dict[str, tuple[str, ...]] = field(default_factory=dict)
    daemon: Process | None = None

    def home(self, name: str) -> Path:
        """A DAGSTER_HOME of its own for name, holding the cluster's dagster.yaml."""
        home = self.root / name / "dagster_home"
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text(yaml.safe_dump(self.instance_config), encoding="utf-8")
        return home

    def start_worker(self, name: str, queues: Iterable[str]) -> Process:
        """`dagster-celery worker start` on queues (one comma-separated -q: a second -q replaces the first)."""
        folder = self.root / name
        tmpdir = folder / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "DAGSTER_HOME": str(self.home(name)), "TMPDIR": str(tmpdir)}
        command = [
            str(BIN / "dagster-celery"),
            "worker",
            "start",
            "-A",
            "dagster_celery.app",
            "-y",
            str(self.worker_config),
            "-q",
            ",".join(queues),
            "-n",
            name,
            "-l",
            "INFO",
            "--",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",  # quicker start, no chatter
        ]
        worker = self._spawn(name, command, env, folder / "work")
        self.workers[name], self.queues[name] = worker, tuple(queues)
        worker.wait_for_log(" ready.")
        return worker

    def restart_worker(self, name: str) -> Process:
        self.workers[name].stop()
        self.workers[name].log.rename(self.workers[name].log.with_suffix(f".{time.time_ns()}.log"))
        return self.start_worker(name, self.queues[name])

    def worker_of(self, record: Mapping) -> str:
        """The worker a probe record was written by, from its working directory."""
        for name, worker in self.workers.items():
            if Path(record["cwd"]) == worker.cwd:
                return name
        raise ClusterError(f"run {record['run_id']} ran in {record['cwd']}, no worker of this cluster's")

    def probe_records(self) -> dict[str, dict]:
        """run id -> the probe's finished record (never a partial file: those have hidden names)."""
        return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in self.records.glob("*.json")}

    def start_daemon(self) -> Process:
        workspace = self.root / "workspace.yaml"
        workspace.write_text(
            yaml.safe_dump(
                {
                    "load_from": [
                        {
                            "python_module": {
                                "module_name": module,
                                "working_directory": str(REPO_ROOT),
                                "location_name": name,
                            }
                        }
                        for name, module in self.code_locations.items()
                    ]
                }
            ),
            encoding="utf-8",
        )
        env = {**self.env, "DAGSTER_HOME": str(self.home("daemon"))}
        self.daemon = self._spawn(
            "daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)], env, self.root / "daemon"
        )
        self.daemon.wait_for_log("Instance is configured with the following daemons")
        return self.daemon

    def _spawn(self, name: str, command: list[str], env: dict, cwd: Path) -> Process:
        cwd.mkdir(parents=True, exist_ok=True)
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            # A session of its own: the process and all its children can be signalled at once.
            popen = subprocess.Popen(
                command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return Process(name, popen, log, cwd)

    def stop(self) -> None:
        for process in [*self.workers.values(), *([self.daemon] if self.daemon else [])]:
            process.stop()


@contextmanager
def celery_cluster(
    root: Path,
    workers: Mapping[str, Iterable[str]],
    extra_env: Mapping[str, str] | None = None,
    code_locations: Mapping[str, str] | None = None,
) -> Iterator[CeleryCluster]:
    """A database, the workers (name -> queues), the daemon; all stopped and cleaned on exit.
    code_locations (location name -> module; default the probe job) are what the daemon serves."""
    key_prefix = f"rag-eval-test-{os.getpid()}-{uuid.uuid4().hex[:6]}:"
    with ExitStack() as stack:
        url = stack.enter_context(fresh_database())
        stack.callback(_delete_keys, key_prefix)
        records = root / "records"
        records.mkdir(parents=True, exist_ok=True)
        worker_config = root / "worker.yaml"
        worker_config.write_text(yaml.safe_dump(cluster_worker_config(key_prefix)), encoding="utf-8")
        env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # `dagster-celery` runs `celery`
            "DAGSTER_PG_URL": url,
            "RAG_EVAL_CELERY_BROKER_URL": REDIS_URL,
            "RAG_EVAL_CELERY_BACKEND_URL": REDIS_URL,
            RECORDS_VARIABLE: str(records),
            **(extra_env or {}),
        }
        cluster = CeleryCluster(
            root,
            env,
            cluster_instance_config(key_prefix),
            worker_config,
            records,
            key_prefix,
            dict(code_locations or {PROBE_LOCATION: PROBE_MODULE}),
        )
        stack.callback(cluster.stop)
        for name, queues in workers.items():
            cluster.start_worker(name, queues)
        cluster.start_daemon()
        yield cluster


def _delete_keys(key_prefix: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{key_prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


# --- the test process's side: an instance on the cluster's database, runs created and submitted -----


@contextmanager
def cluster_instance(cluster: CeleryCluster):
    """The cluster's Dagster instance, for submitting runs (submit_run) and reading their records."""
    from dagster import DagsterInstance

    with _environment({name: cluster.env[name] for name in INSTANCE_VARIABLES}):
        instance = DagsterInstance.from_config(str(cluster.home("test")))
        # Built now, while dagster.yaml's variables are set; the rest of the session never sees them.
        _ = instance.run_storage, instance.event_log_storage, instance.run_coordinator, instance.run_launcher
    with instance:
        yield instance


@contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def submit_run(
    instance,
    tenant: str,
    dataset_version: str,
    tags: Mapping[str, str],
    job_name: str = PROBE_JOB,
    location_name: str = PROBE_LOCATION,
    run_config: Mapping | None = None,
) -> str:
    """Register (tenant, dataset_version), create a run of job_name on it with tags and queue it, as
    `rag-eval` does in production mode; its id. The daemon launches it when the run queue's limits allow."""
    from rag_eval_pipeline.automation.submission import submit
    from rag_eval_pipeline.partitions import register_partition

    key = register_partition(instance, tenant, dataset_version)
    module = dict(CODE_LOCATIONS_BY_NAME, **{PROBE_LOCATION: PROBE_MODULE})[location_name]
    return submit(
        instance,
        job_name,
        key,
        dict(run_config or {}),
        tags,
        module=module,
        location_name=location_name,
        working_directory=str(REPO_ROOT),
    )


def wait_for_runs(instance, run_ids: Iterable[str], timeout_s: float = 90.0) -> dict:
    """run id -> RunRecord once every run has finished (success, failure or canceled)."""
    from dagster._core.storage.dagster_run import FINISHED_STATUSES, RunsFilter

    run_ids = list(run_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        records = {r.dagster_run.run_id: r for r in instance.get_run_records(RunsFilter(run_ids=run_ids))}
        if all(r.dagster_run.status in FINISHED_STATUSES for r in records.values()) and len(records) == len(run_ids):
            return records
        if time.monotonic() > deadline:
            statuses = {run_id: str(r.dagster_run.status) for run_id, r in records.items()}
            raise TimeoutError(f"runs not finished after {timeout_s:.0f} s: {statuses}")
        time.sleep(0.25)


# What `dagster-celery worker start -y <yaml>` does before it runs `celery -A dagster_celery.app worker`:
# write the YAML's executor config as the module `dagster_celery_config`, which that app imports.
_WORKER_SETTINGS = (
    "import json, sys\n"
    "from dagster_celery.cli import get_config_dir\n"
    "sys.path.insert(0, get_config_dir(sys.argv[1]))\n"
    "from dagster_celery.app import app\n"
    "print(json.dumps({'broker': app.conf.broker_url, 'backend': app.conf.result_backend}))\n"
)


def worker_app_settings(worker_yaml: Path, dagster_home: Path, env: Mapping[str, str]) -> dict[str, str]:
    """{'broker': ..., 'backend': ...} as a worker started on worker_yaml (under env) would connect."""
    result = subprocess.run(
        [sys.executable, "-c", _WORKER_SETTINGS, str(worker_yaml)],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "DAGSTER_HOME": str(dagster_home)},
        timeout=120,
    )
    if result.returncode:
        raise ClusterError(f"reading {worker_yaml} as a worker failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
