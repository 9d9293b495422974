"""The settings: locations default to folders of the working directory, the environment moves them,
and a bad judge option is one line naming its variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval_pipeline import settings

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
VARIABLES = [variable for variable, _ in settings.LOCATIONS.values()] + list(settings.JUDGE_VARIABLES.values())


@pytest.fixture
def clean_env(monkeypatch):
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)


def test_the_defaults_follow_the_working_directory(clean_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    current = settings.load()
    assert current.documents_root == tmp_path / "data" / "tenants"
    assert current.warehouse_root == tmp_path / "warehouse"
    assert current.candidates_root == tmp_path / "candidates"
    assert current.dagster_home == tmp_path / ".dagster_home"
    assert current.judge.cache == str(tmp_path / "warehouse" / "judge_cache.sqlite")
    assert current.judge.kind == "offline" and current.judge.timeout_s == 90.0 and current.judge.max_retries == 2


def test_the_environment_moves_each_location_and_sets_the_judge(tmp_path):
    environ = {
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "w"),
        "DAGSTER_HOME": str(tmp_path / "h"),
        "RAG_EVAL_DOCUMENTS_ROOT": "",
        "RAG_EVAL_JUDGE": "llm",
        "RAG_EVAL_JUDGE_TIMEOUT_S": "0.5",
        "RAG_EVAL_JUDGE_RESPONSE_FORMAT": "json_object_schema",
        "RAG_EVAL_JUDGE_MODE": "fused",
    }
    current = settings.load(environ, cwd=tmp_path / "cwd")
    assert current.warehouse_root == tmp_path / "w" and current.dagster_home == tmp_path / "h"
    assert current.documents_root == tmp_path / "cwd" / "data" / "tenants"  # an empty variable counts as unset
    assert current.judge.cache == str(tmp_path / "w" / "judge_cache.sqlite")  # the cache follows the warehouse
    assert (current.judge.kind, current.judge.timeout_s, current.judge.mode) == ("llm", 0.5, "fused")
    assert current.judge.response_format == "json_object_schema"


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("RAG_EVAL_JUDGE_MAX_RETRIES", "three", "RAG_EVAL_JUDGE_MAX_RETRIES must be an integer, got 'three'"),
        ("RAG_EVAL_JUDGE_MAX_RETRIES", "-1", "RAG_EVAL_JUDGE_MAX_RETRIES must be at least 0, got '-1'"),
        ("RAG_EVAL_JUDGE_CONCURRENCY", "0", "RAG_EVAL_JUDGE_CONCURRENCY must be at least 1, got '0'"),
        ("RAG_EVAL_JUDGE_TIMEOUT_S", "soon", "RAG_EVAL_JUDGE_TIMEOUT_S must be a number, got 'soon'"),
        ("RAG_EVAL_JUDGE_TIMEOUT_S", "inf", "RAG_EVAL_JUDGE_TIMEOUT_S must be a finite number, got 'inf'"),
        ("RAG_EVAL_JUDGE_MODE", "chatty", "RAG_EVAL_JUDGE_MODE must be one of 'decomposed' or 'fused', got 'chatty'"),
        ("RAG_EVAL_JUDGE_RESPONSE_FORMAT", "json", "RAG_EVAL_JUDGE_RESPONSE_FORMAT must be one of 'json_schema' or"),
        ("RAG_EVAL_RUN_STALE_AFTER_S", "0", "RAG_EVAL_RUN_STALE_AFTER_S must be at least 1"),
        ("RAG_EVAL_RUN_STALE_AFTER_S", "soon", "RAG_EVAL_RUN_STALE_AFTER_S must be a number, got 'soon'"),
        ("RAG_EVAL_EMBEDDING_PRECISION", "fp16", "RAG_EVAL_EMBEDDING_PRECISION must be one of 'float32' or 'int8'"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_variable(variable, value, message):
    with pytest.raises(settings.SettingsError) as raised:
        settings.load({variable: value})
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


@pytest.mark.cli
def test_the_cli_keeps_its_dagster_home_in_the_working_directory(tmp_path):
    """Not beside the installed package: `register` with no variable set writes ./.dagster_home."""
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    completed = subprocess.run(
        [RAG_EVAL, "register", "--tenant", "acme", "--version", "v1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / ".dagster_home").is_dir()


def test_the_followed_branch_and_the_candidate_modules_come_from_the_same_settings(tmp_path):
    assert settings.load({}, cwd=tmp_path).followed_branch is None
    assert settings.load({"RAG_EVAL_CANDIDATE_BRANCH": "dev"}, cwd=tmp_path).followed_branch is None  # no repo: none
    loaded = settings.load(
        {
            "RAG_EVAL_CANDIDATE_REPO": "/srv/rag",
            "RAG_EVAL_CANDIDATE_TENANT": "acme",
            "RAG_EVAL_CANDIDATE_MODULES": " my_rag , team.rag ,",
        },
        cwd=tmp_path,
    )
    assert (
        loaded.followed_branch.repo,
        loaded.followed_branch.branch,
        loaded.followed_branch.tenant,
        loaded.followed_branch.entry,
    ) == ("/srv/rag", "main", "acme", "reference")
    assert loaded.candidate_modules == ("my_rag", "team.rag")


def test_an_object_store_without_the_results_database_is_one_line_without_the_secrets():
    from rag_eval_pipeline.settings import SettingsError, load

    with pytest.raises(SettingsError) as error:
        load(
            {
                "RAG_EVAL_OBJECT_STORE_URL": "s3://bucket/p",
                "RAG_EVAL_OBJECT_STORE_ENDPOINT": "http://h:1",
                "RAG_EVAL_CACHE_URL": "redis://:s3cret@h:6379/0",
            },
            cwd=Path("/tmp"),
        )
    assert "RAG_EVAL_DATABASE_URL is not" in str(error.value) and "s3cret" not in str(error.value)
    with pytest.raises(SettingsError, match="RAG_EVAL_OBJECT_STORE_ENDPOINT is not"):
        load({"RAG_EVAL_OBJECT_STORE_URL": "s3://bucket/p", "RAG_EVAL_DATABASE_URL": "postgresql://h/db"})
    assert load({"RAG_EVAL_DATABASE_URL": "postgresql://h/db"}).production.enabled
    assert not load({}).production.enabled
