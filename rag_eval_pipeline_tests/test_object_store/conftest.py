"""Each test gets its own prefix in the bucket of the session's SeaweedFS server (support/services.py)."""

from __future__ import annotations

import uuid

import pytest

from rag_eval_pipeline.stores.object_store import ObjectStore, ObjectStoreSettings


@pytest.fixture
def store_config(s3) -> ObjectStoreSettings:
    return ObjectStoreSettings(
        base_url=f"s3://{s3.bucket}/tests-{uuid.uuid4().hex[:8]}/tables",
        endpoint_url=s3.endpoint_url,
        access_key_id=s3.access_key_id,
        secret_access_key=s3.secret_access_key,
    )


@pytest.fixture
def store(store_config) -> ObjectStore:
    return ObjectStore(store_config)
