"""The tenant fixtures (see tenant_fixtures.py), and the environment `rag-eval` runs with (in a subprocess
or in the test's process: support/cli.py)."""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag_eval_pipeline.instance import local_instance
from rag_eval_pipeline.partitions import register_partition

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(tmp_path, tenant_dirs):
    """`rag-eval` run as a user runs it, with every location moved into a temporary folder."""
    documents_root, warehouse_root = tenant_dirs
    return {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(documents_root),
        "RAG_EVAL_WAREHOUSE": str(warehouse_root),
        # Test candidates live in the test package, importable from the repo root like a user's module.
        "PYTHONPATH": str(REPO_ROOT),
    }


@contextmanager
def cli_instance(env: dict):
    """The Dagster instance `rag-eval` opens under env (its DAGSTER_HOME, set up as the CLI sets it up)."""
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])  # local_instance sets it too: undone on exit
        with local_instance() as instance:
            yield instance


@pytest.fixture
def synthesized_cli_env(cli_env, synthesized_acme):
    """cli_env as after `rag-eval register` and `rag-eval run --job synthesis` for acme/v1.

    The warehouse is a copy of the session's synthesized acme (see tenant_fixtures); the partition is
    registered in this test's own Dagster home, in process.
    """
    with cli_instance(cli_env) as instance:
        register_partition(instance, "acme", "v1")
    return cli_env
