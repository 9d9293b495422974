"""Shared fixtures: paths to the sample corpora and one embedding model for the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_FOLDER = REPO_ROOT / "data" / "tenants" / "demo"
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def demo_folder() -> Path:
    assert DEMO_FOLDER.is_dir(), f"demo corpus missing at {DEMO_FOLDER}"
    return DEMO_FOLDER


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    assert SHARED_CORPUS.is_dir(), f"shared PDF corpus missing at {SHARED_CORPUS} (CI lays ../shared beside the clone)"
    return SHARED_CORPUS


@pytest.fixture(scope="session")
def embedder():
    """all-MiniLM-L6-v2 with an in-memory cache; loading the model takes a few seconds, so load it once."""
    from rag_eval_pipeline.core.embeddings import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def offline_judge(embedder):
    from rag_eval_pipeline.core.judging.judge import OfflineJudge

    return OfflineJudge(embedder)
