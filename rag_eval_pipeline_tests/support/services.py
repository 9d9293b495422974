"""Session fixtures for the services production mode uses, started once per test session.

One SeaweedFS S3 server serves the object-store tests, the production tests and the Celery tests (each
uses a prefix of its own); a test that takes it down starts it again (`s3`). The results database's
fixtures are in support/postgres.py. Registered for the whole suite in the root conftest.py.
"""

from __future__ import annotations

import uuid

import pytest

from rag_eval_pipeline_tests.support.object_store import SeaweedS3Server

CACHE_DB = "redis://127.0.0.1:6379/14"


@pytest.fixture(scope="session")
def s3_server():
    server = SeaweedS3Server(bucket="rag-eval-tables")
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def s3(s3_server):
    """The session's server, started again if a test took it down."""
    if not s3_server.running:
        s3_server.start()
    return s3_server


@pytest.fixture(scope="session")
def production_environment(upgraded_database, s3_server) -> dict[str, str]:
    """The variables that turn production mode on, each service a fresh namespace of this session."""
    return production_variables(upgraded_database.app_url, s3_server, f"session-{uuid.uuid4().hex[:8]}")


def production_variables(database_url: str, server: SeaweedS3Server, prefix: str) -> dict[str, str]:
    return {
        "RAG_EVAL_DATABASE_URL": database_url,
        "RAG_EVAL_OBJECT_STORE_URL": f"s3://{server.bucket}/{prefix}",
        "RAG_EVAL_OBJECT_STORE_ENDPOINT": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
        "RAG_EVAL_CACHE_URL": CACHE_DB,
    }
