"""Shared fixtures: paths to the sample corpora and one embedding model for the whole session.

The tests run on a plain clone: the awkward documents they read are generated once per session
(support/awkward_pdfs.py). Only tests that measure against the public PDFs in ../shared/corpus ask for
`shared_corpus`, and they skip, naming it, when it is not beside the clone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_eval_pipeline.cli.signals import stay_stoppable

# Fixtures shared across folders, registered once for the whole suite (never imported into a test module).
pytest_plugins = [
    "rag_eval_pipeline_tests.tenant_fixtures",
    "rag_eval_pipeline_tests.support.postgres",
    "rag_eval_pipeline_tests.support.services",
    "rag_eval_pipeline_tests.support.phoenix",
]

# A suite started in the background by a shell inherits SIGINT ignored; after the first Dagster run
# SIGTERM would be ignored too, and so in every process the tests start (cli/signals.py).
stay_stoppable()

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_FOLDER = REPO_ROOT / "data" / "tenants" / "demo"
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
MAX_WORKERS = 4


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def demo_folder() -> Path:
    assert DEMO_FOLDER.is_dir(), f"demo corpus missing at {DEMO_FOLDER}"
    return DEMO_FOLDER


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto`: one worker more than the cores this process may use, at most four. Many slow tests mostly
    wait (on a killed process, a grace period, a server, a Celery worker), so the extra worker keeps the
    cores busy meanwhile; each worker starts its own services (the LLM server, the S3 server) and loads
    the embedding model, so more than four would cost memory, not time."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # not on macOS
    return max(1, min(usable + 1, MAX_WORKERS))


def pytest_collection_modifyitems(items):
    """Mark every test that reads ../shared/corpus `corpus`: benchmark-scale files the fast loop leaves out."""
    for item in items:
        if "shared_corpus" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    if not SHARED_CORPUS.is_dir():
        pytest.skip(f"needs the public PDF corpus ../shared/corpus beside the clone ({SHARED_CORPUS} is absent)")
    return SHARED_CORPUS


@pytest.fixture(scope="session")
def awkward_corpus(tmp_path_factory):
    """Our own awkward PDFs and unreadable files, written once per session; tests read them, never change them."""
    from rag_eval_pipeline_tests.support.awkward_pdfs import build

    return build(tmp_path_factory.mktemp("awkward"))


@pytest.fixture(scope="session")
def embedder():
    """all-MiniLM-L6-v2 with an in-memory cache; loading the model takes a few seconds, so load it once."""
    from rag_eval_pipeline.core.embeddings import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def offline_judge(embedder):
    from rag_eval_pipeline.core.judging.judge import OfflineJudge

    return OfflineJudge(embedder)
