"""The LLM judge's settings and identity: timeout and retries from the CLI, the resource and the
environment, their validation, and a prompt version in the judge's name that follows every prompt edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import (
    DagsterInvalidConfigError,
    Definitions,
    EnvVar,
    asset,
    build_resources,
    define_asset_job,
    validate_run_config,
)
from pydantic import ValidationError

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.judging import llm_judge
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge, prompt_version
from rag_eval_pipeline.core.llm.client import LLMSettings, LLMUnavailable, StructuredLLM
from rag_eval_pipeline.resources import EmbedderResource
from rag_eval_pipeline.resources.judge import JudgeResource
from rag_eval_pipeline.settings import SettingsError
from rag_eval_pipeline.synthesis import llm_generation
from rag_eval_pipeline.synthesis.items import SIMPLE
from rag_eval_pipeline_tests.fake_openai_server import HANG, FakeOpenAIServer, Reply

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
ITEM = EvalItem("q1", "How long are API logs kept?", "90 days.", [{"id": "a", "text": "Logs are kept for 90 days."}])


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout_s", 0),
        ("timeout_s", -1.0),
        ("timeout_s", float("nan")),
        ("timeout_s", float("inf")),
        ("max_retries", -1),
        ("max_retries", 1.5),
        ("concurrency", 0),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_option(option, value):
    with pytest.raises(ValueError, match=option):
        LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", **{option: value})


def _resource_from_env() -> JudgeResource:
    return JudgeResource.from_settings(settings.load().judge, EmbedderResource(), cache_path="")


def test_the_environment_sets_the_resource_judges_timeout_and_retries(monkeypatch):
    with FakeOpenAIServer(default=Reply(action=HANG)) as server:
        for name, value in {
            "RAG_EVAL_JUDGE": "llm",
            "RAG_EVAL_JUDGE_BASE_URL": server.base_url,
            "RAG_EVAL_JUDGE_MODEL": "fake",
            "RAG_EVAL_JUDGE_TIMEOUT_S": "0.3",
            "RAG_EVAL_JUDGE_MAX_RETRIES": "0",
        }.items():
            monkeypatch.setenv(name, value)
        # Resolved as Dagster resolves it at launch: the URL and model are EnvVars until then.
        with build_resources({"judge": _resource_from_env()}) as resources:
            judge = resources.judge.get()
        with pytest.raises(LLMUnavailable, match=r"did not answer within 0\.3 s after 1 attempt "):
            judge.judge_many([ITEM], {ANSWER_STATEMENTS})
    assert len(server.requests) == 1


def test_a_malformed_number_in_the_environment_names_its_variable(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_JUDGE_MAX_RETRIES", "three")
    with pytest.raises(SettingsError, match="RAG_EVAL_JUDGE_MAX_RETRIES must be an integer, got 'three'"):
        _resource_from_env()


def _evaluate(tmp_path, *options) -> subprocess.CompletedProcess:
    source = tmp_path / "rows.jsonl"
    source.write_text(
        json.dumps(
            {
                "question": ITEM.question,
                "contexts": ITEM.context_texts,
                "answer": ITEM.answer,
                "ground_truth": "API logs are kept for 90 days.",
            }
        )
        + "\n"
    )
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    return subprocess.run(
        [
            RAG_EVAL,
            "evaluate",
            "--input",
            str(source),
            "--out",
            str(tmp_path / "scores.jsonl"),
            "--metrics",
            "faithfulness",
            "--judge",
            "llm",
            "--model",
            "fake",
            "--cache",
            "",
            *options,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.cli
def test_cli_timeout_and_retries_bound_a_hanging_server(tmp_path):
    with FakeOpenAIServer(default=Reply(action=HANG)) as server:
        completed = _evaluate(tmp_path, "--base-url", server.base_url, "--timeout-s", "0.5", "--max-retries", "1")
    assert completed.returncode == 2, completed.stderr
    last_line = completed.stderr.strip().splitlines()[-1]
    assert server.base_url in last_line and "did not answer within 0.5 s after 2 attempts" in last_line
    assert len(server.requests) == 2


def _judge_name(n_questions: int = 3) -> str:
    return LLMJudge(
        StructuredLLM(LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")), n_questions=n_questions
    ).name


def test_the_judge_name_carries_a_prompt_version_that_every_prompt_edit_changes(monkeypatch):
    original = _judge_name()
    assert original == f"llm:m:decomposed:prompt-{prompt_version(3)}"
    assert _judge_name(n_questions=4) != original  # the prompt asks for another number of questions
    edits = [
        lambda: monkeypatch.setitem(
            llm_judge.PROMPTS, "ground_truth", llm_judge.PROMPTS["ground_truth"].replace("useful", "helpful")
        ),
        lambda: monkeypatch.setattr(llm_judge, "SYSTEM", llm_judge.SYSTEM + " Be lenient."),
        lambda: monkeypatch.setitem(llm_judge.SCHEMAS, "answer", llm_judge.StatementVerdicts),
    ]
    for edit in edits:
        edit()
        assert _judge_name() != original
        monkeypatch.undo()
        assert _judge_name() == original


def test_the_prompt_version_is_the_same_in_another_process():
    # A salted hash() would differ between processes and split one judge's scores into many.
    code = "from rag_eval_pipeline.core.judging.llm_judge import prompt_version; print(prompt_version(3))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert other.stdout.strip() == prompt_version(3)


def test_the_generator_prompt_version_follows_its_prompts(monkeypatch):
    assert llm_generation.PROMPT_VERSION == llm_generation._prompt_version()  # computed, not written by hand
    monkeypatch.setitem(llm_generation.INSTRUCTIONS, SIMPLE, llm_generation.INSTRUCTIONS[SIMPLE] + " Be brief.")
    assert llm_generation._prompt_version() != llm_generation.PROMPT_VERSION
    monkeypatch.undo()
    monkeypatch.setattr(llm_generation, "SYSTEM", "You write questions.")
    assert llm_generation._prompt_version() != llm_generation.PROMPT_VERSION


# --- the judge resource: typed, its defaults in the settings, strings from the environment as EnvVar ----


@asset
def _judged(judge: JudgeResource) -> str:
    return judge.kind


def test_a_bad_kind_mode_or_format_is_refused_by_dagster_at_launch():
    job = Definitions(
        assets=[_judged],
        jobs=[define_asset_job("judged")],
        resources={"judge": JudgeResource(embedder=EmbedderResource())},
    ).resolve_job_def("judged")
    for field, value in (("kind", "llx"), ("mode", "split"), ("response_format", "json")):
        with pytest.raises(DagsterInvalidConfigError, match=rf"root:resources:judge:config:{field} not in enum type"):
            validate_run_config(job, {"resources": {"judge": {"config": {field: value}}}})
    assert validate_run_config(job, {"resources": {"judge": {"config": {"kind": "llm"}}}})


def test_a_bad_value_is_refused_when_the_resource_is_made():
    with pytest.raises(ValidationError, match="kind"):
        JudgeResource(embedder=EmbedderResource(), kind="llx")
    with pytest.raises(ValidationError, match="timeout_s"):
        JudgeResource(embedder=EmbedderResource(), timeout_s=0)


def test_a_bad_kind_in_the_environment_is_one_line_naming_its_variable(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_JUDGE", "llx")
    with pytest.raises(SettingsError) as error:
        _resource_from_env()
    assert str(error.value) == "RAG_EVAL_JUDGE must be one of 'offline' or 'llm', got 'llx'"


def test_the_resource_defaults_are_the_settings_defaults():
    resource, defaults = JudgeResource(embedder=EmbedderResource()), settings.JudgeSettings()
    for field in (
        "kind",
        "base_url",
        "model",
        "api_key",
        "mode",
        "response_format",
        "timeout_s",
        "max_retries",
        "rate_limit_budget_s",
        "priority",
        "priority_by_tier",
        "concurrency",
    ):
        assert getattr(resource, field) == getattr(defaults, field), field


def test_text_the_environment_sets_goes_to_dagster_by_name_the_rest_from_the_settings():
    environ = {
        "RAG_EVAL_JUDGE": "llm",
        "RAG_EVAL_JUDGE_API_KEY": "sk-secret",
        "RAG_EVAL_JUDGE_MODEL": "m",
        "RAG_EVAL_JUDGE_MODE": "fused",
        "RAG_EVAL_JUDGE_CONCURRENCY": "2",
    }
    judge = settings.load(environ).judge
    resource = JudgeResource.from_settings(judge, EmbedderResource(), cache_path="/tmp/cache.sqlite", environ=environ)
    assert isinstance(resource.api_key, EnvVar) and resource.api_key.env_var_name == "RAG_EVAL_JUDGE_API_KEY"
    assert resource.model.env_var_name == "RAG_EVAL_JUDGE_MODEL"
    assert (resource.kind, resource.mode, resource.concurrency) == ("llm", "fused", 2)
    assert (resource.base_url, resource.cache_path) == ("", "/tmp/cache.sqlite")  # unset: the settings' value
    moved = JudgeResource.from_settings(
        judge, EmbedderResource(), "/tmp/cache.sqlite", {**environ, "RAG_EVAL_JUDGE_CACHE": "/elsewhere.sqlite"}
    )
    assert moved.cache_path.env_var_name == "RAG_EVAL_JUDGE_CACHE"  # the variable wins over the default place


def test_an_env_var_unset_at_launch_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_JUDGE_API_KEY", "sk-secret")
    resource = _resource_from_env()
    monkeypatch.delenv("RAG_EVAL_JUDGE_API_KEY")
    with pytest.raises(DagsterInvalidConfigError, match="RAG_EVAL_JUDGE_API_KEY"):
        with build_resources({"judge": resource}):
            pass
