"""Production mode's services for the session: an upgraded results database on the local Postgres, a real
S3-compatible server (SeaweedFS) started here, and the local Redis for the shared caches."""

import uuid

import pytest

from rag_eval_pipeline_tests.support.object_store import start_seaweed_s3
from rag_eval_pipeline_tests.support.postgres import (  # noqa: F401 - fixtures
    scratch_database_factory,
    shared_admin_url,
    upgraded_database,
)

CACHE_DB = "redis://127.0.0.1:6379/14"


@pytest.fixture(scope="session")
def object_store_server():
    server = start_seaweed_s3()
    yield server
    server.close()


@pytest.fixture(scope="session")
def production_environment(upgraded_database, object_store_server) -> dict[str, str]:
    """The variables that turn production mode on, each service a fresh namespace of this session."""
    return production_variables(upgraded_database.app_url, object_store_server, f"session-{uuid.uuid4().hex[:8]}")


def production_variables(database_url: str, server, prefix: str) -> dict[str, str]:
    return {
        "RAG_EVAL_DATABASE_URL": database_url,
        "RAG_EVAL_OBJECT_STORE_URL": f"s3://{server.bucket}/{prefix}",
        "RAG_EVAL_OBJECT_STORE_ENDPOINT": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
        "RAG_EVAL_CACHE_URL": CACHE_DB,
    }
