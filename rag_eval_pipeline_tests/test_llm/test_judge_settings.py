"""The LLM judge's settings and identity: timeout and retries from the CLI, the resource and the
environment, their validation, and a prompt version in the judge's name that follows every prompt edit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval_pipeline.core.judging import llm_judge
from rag_eval_pipeline.core.judging.judgement import ANSWER_STATEMENTS
from rag_eval_pipeline.core.llm.client import JudgeUnavailable, LLMSettings, StructuredLLM
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge, prompt_version
from rag_eval_pipeline.core.judging.metrics import EvalItem
from rag_eval_pipeline.resources import EmbedderResource
from rag_eval_pipeline.resources.judge import judge_from_env
from rag_eval_pipeline.synthesis import llm_generation
from rag_eval_pipeline.synthesis.items import SIMPLE

from rag_eval_pipeline_tests.fake_openai_server import HANG, FakeOpenAIServer, Reply

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
ITEM = EvalItem("q1", "How long are API logs kept?", "90 days.", [{"id": "a", "text": "Logs are kept for 90 days."}])


@pytest.mark.parametrize(("option", "value"), [
    ("timeout_s", 0), ("timeout_s", -1.0), ("timeout_s", float("nan")), ("timeout_s", float("inf")),
    ("max_retries", -1), ("max_retries", 1.5), ("concurrency", 0),
])
def test_settings_out_of_range_are_refused_naming_the_option(option, value):
    with pytest.raises(ValueError, match=option):
        LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", **{option: value})


def test_the_environment_sets_the_resource_judges_timeout_and_retries(monkeypatch):
    with FakeOpenAIServer(default=Reply(action=HANG)) as server:
        for name, value in {"RAG_EVAL_JUDGE": "llm", "RAG_EVAL_JUDGE_BASE_URL": server.base_url,
                            "RAG_EVAL_JUDGE_MODEL": "fake", "RAG_EVAL_JUDGE_TIMEOUT_S": "0.3",
                            "RAG_EVAL_JUDGE_MAX_RETRIES": "0"}.items():
            monkeypatch.setenv(name, value)
        judge = judge_from_env(EmbedderResource(), "").get()
        with pytest.raises(JudgeUnavailable, match=r"did not answer within 0\.3 s after 1 attempt "):
            judge.judge_many([ITEM], {ANSWER_STATEMENTS})
    assert len(server.requests) == 1


def test_a_malformed_number_in_the_environment_names_its_variable(monkeypatch):
    monkeypatch.setenv("RAG_EVAL_JUDGE_MAX_RETRIES", "three")
    with pytest.raises(ValueError, match="RAG_EVAL_JUDGE_MAX_RETRIES must be an integer, got 'three'"):
        judge_from_env(EmbedderResource(), "")


def _evaluate(tmp_path, *options) -> subprocess.CompletedProcess:
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps({"question": ITEM.question, "contexts": ITEM.context_texts, "answer": ITEM.answer,
                                  "ground_truth": "API logs are kept for 90 days."}) + "\n")
    env = {**os.environ, "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    return subprocess.run(
        [RAG_EVAL, "evaluate", "--input", str(source), "--out", str(tmp_path / "scores.jsonl"),
         "--metrics", "faithfulness", "--judge", "llm", "--model", "fake", "--cache", "", *options],
        env=env, capture_output=True, text=True, timeout=120,
    )


def test_cli_timeout_and_retries_bound_a_hanging_server(tmp_path):
    with FakeOpenAIServer(default=Reply(action=HANG)) as server:
        completed = _evaluate(tmp_path, "--base-url", server.base_url, "--timeout-s", "0.5", "--max-retries", "1")
    assert completed.returncode == 2, completed.stderr
    last_line = completed.stderr.strip().splitlines()[-1]
    assert server.base_url in last_line and "did not answer within 0.5 s after 2 attempts" in last_line
    assert len(server.requests) == 2


def _judge_name(n_questions: int = 3) -> str:
    return LLMJudge(StructuredLLM(LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")), n_questions=n_questions).name


def test_the_judge_name_carries_a_prompt_version_that_every_prompt_edit_changes(monkeypatch):
    original = _judge_name()
    assert original == f"llm:m:decomposed:prompt-{prompt_version(3)}"
    assert _judge_name(n_questions=4) != original  # the prompt asks for another number of questions
    edits = [
        lambda: monkeypatch.setitem(llm_judge.PROMPTS, "ground_truth",
                                    llm_judge.PROMPTS["ground_truth"].replace("useful", "helpful")),
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
