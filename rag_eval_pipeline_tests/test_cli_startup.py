"""`rag-eval` starts fast: its help, and its bad-input errors, import none of the heavy libraries."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cli]

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")
HEAVY = ("dagster", "torch", "pandas", "sentence_transformers", "great_expectations")

# Runs the CLI in a fresh interpreter and reports, as JSON, the exit codes and which heavy modules got loaded.
PROBE = """
import json, sys
from rag_eval_pipeline import cli
codes = [cli.main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))


def _probe(*argvs: list[str], env: dict | None = None) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argvs)], capture_output=True, text=True, timeout=120, env=env
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_the_help_of_every_command_imports_nothing_heavy():
    commands = [
        ["--help"],
        ["gate", "--help"],
        ["run", "--help"],
        ["evaluate", "--help"],
        ["synthesize", "--help"],
        ["review", "import", "--help"],
        ["baseline", "promote", "--help"],
        ["diff", "--help"],
        ["runs", "stuck", "--help"],
        ["runs", "clear", "--help"],
    ]
    result = _probe(*commands)
    assert result == {"codes": [0] * len(commands), "heavy": []}


def test_the_help_shows_the_defaults():
    completed = subprocess.run([RAG_EVAL, "gate", "--help"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0
    assert "--tolerance" in completed.stdout and "0.05" in completed.stdout
    evaluate = subprocess.run([RAG_EVAL, "evaluate", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "20,000 characters" in evaluate and "json_object_schema" in evaluate


@pytest.mark.parametrize(
    "argv, variables, message",
    [
        (["gate", "--tenant", "acme"], {}, "error: Missing option '--candidate'"),
        (["run", "--tenant", "acme", "--version", "v1", "--job", "nightly"], {}, "error: Invalid value for '--job'"),
        (
            ["gate", "--tenant", "acme", "--candidate", "c1", "--entry", "a:b", "--outputs", "o.jsonl"],
            {},
            "error: --entry and --outputs name two candidates",
        ),
        (
            ["evaluate", "--input", "in.jsonl", "--out", "out.jsonl"],
            {"RAG_EVAL_JUDGE_MAX_RETRIES": "three"},
            "error: RAG_EVAL_JUDGE_MAX_RETRIES must be an integer, got 'three'",
        ),
        (
            ["evaluate", "--input", "in.jsonl", "--out", "out.jsonl"],
            {"RAG_EVAL_JUDGE": "gpt"},
            "error: RAG_EVAL_JUDGE must be one of 'offline' or 'llm', got 'gpt'",
        ),
        ([], {}, "error: Missing command."),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2_before_any_heavy_import(argv, variables, message):
    env = {**os.environ, **variables}
    completed = subprocess.run([RAG_EVAL, *argv], capture_output=True, text=True, timeout=60, env=env)
    assert completed.returncode == 2
    assert completed.stdout == ""
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith(message)
    assert _probe(argv, env=env) == {"codes": [2], "heavy": []}


def test_the_code_location_loads_neither_the_llm_client_nor_the_pdf_reader():
    """Every `rag-eval run` and `gate` loads the code location and the launcher. The default judge never
    talks to an LLM server and a gate reads no PDF: openai (about a second) and pypdf are imported only
    by the code that uses them."""
    probe = (
        "import sys, rag_eval_pipeline.definitions, rag_eval_pipeline.cli.launch; "
        "print(sorted(m for m in ('openai', 'pypdf') if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().splitlines()[-1] == "[]"
