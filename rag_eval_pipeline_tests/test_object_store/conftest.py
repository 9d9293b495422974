"""One SeaweedFS S3 server for the session; each test gets its own prefix in the bucket."""

from __future__ import annotations

import uuid

import pytest

from rag_eval_pipeline.core.object_store import ObjectStore, ObjectStoreConfig
from rag_eval_pipeline_tests.support.object_store import SeaweedS3Server


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


@pytest.fixture
def store_config(s3) -> ObjectStoreConfig:
    return ObjectStoreConfig(
        base_url=f"s3://{s3.bucket}/tests-{uuid.uuid4().hex[:8]}/tables",
        endpoint_url=s3.endpoint_url,
        access_key_id=s3.access_key_id,
        secret_access_key=s3.secret_access_key,
    )


@pytest.fixture
def store(store_config) -> ObjectStore:
    return ObjectStore(store_config)
