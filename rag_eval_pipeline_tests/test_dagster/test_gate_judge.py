"""`rag-eval gate` with an LLM judge that cannot be reached: an error exit whose message names the URL."""

import socket

import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval_process

pytestmark = [pytest.mark.dagster, pytest.mark.cli]


def _closed_port_url() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_an_unreachable_judge_fails_the_gate_with_its_url_on_the_error_line(synthesized_cli_env):
    url = _closed_port_url()
    judge_env = {
        **synthesized_cli_env,
        "RAG_EVAL_JUDGE": "llm",
        "RAG_EVAL_JUDGE_BASE_URL": url,
        "RAG_EVAL_JUDGE_MODEL": "m",
        "RAG_EVAL_JUDGE_MAX_RETRIES": "0",
    }

    # A process, with a timeout: a retry loop that never gives up would hang a test in the test's process.
    completed = rag_eval_process(judge_env, "gate", "--tenant", "acme", "--candidate", "c1")

    assert completed.returncode == 2, completed.stdout + completed.stderr
    [error_line] = [line for line in completed.stderr.splitlines() if line.startswith("error in ")]
    assert error_line.startswith("error in metric_scores: LLMUnavailable: ")
    assert f"judge server at {url} did not answer: connection failed" in error_line
