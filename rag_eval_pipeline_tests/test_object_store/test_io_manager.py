"""ObjectStoreIOManager: Dagster's UPathIOManager keyed by (tenant, dataset_version), on a real S3 server."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    DagsterInstance,
    UPathIOManager,
    asset,
    build_init_resource_context,
    build_input_context,
    build_output_context,
    materialize,
)

from rag_eval_pipeline.partitions import register_partition, tenant_version_partitions
from rag_eval_pipeline.resources.object_store import ObjectStoreIOManager, ObjectStoreUPathIOManager
from rag_eval_pipeline.stores.object_store import MissingTableError, ObjectStore, ObjectStoreError
from rag_eval_pipeline_tests.support.object_store import _free_ports

pytestmark = pytest.mark.object_store


@pytest.fixture(scope="module")
def tenants_instance():
    """An instance where acme and globex are registered, for the module's tests."""
    with DagsterInstance.ephemeral() as instance:
        for tenant in ("acme", "globex"):
            register_partition(instance, tenant, "v2024-01")
        yield instance


def factory(config, **changes) -> ObjectStoreIOManager:
    values = {
        "base_url": config.base_url,
        "endpoint_url": config.endpoint_url,
        "access_key_id": config.access_key_id,
        "secret_access_key": config.secret_access_key,
        **changes,
    }
    return ObjectStoreIOManager(**values)


def contexts(instance, asset_name: str, tenant: str, version: str = "v2024-01"):
    key = register_partition(instance, tenant, version)
    common = {
        "asset_key": AssetKey(asset_name),
        "partition_key": key,
        "asset_partitions_def": tenant_version_partitions,
        "instance": instance,
    }
    output = build_output_context(**common)
    return output, build_input_context(upstream_output=output, **common)


@pytest.fixture
def manager(store_config) -> ObjectStoreUPathIOManager:
    return factory(store_config).create_io_manager(build_init_resource_context())


def test_round_trip_through_handle_output_and_load_input(manager, tenants_instance, tmp_path):
    frame = pd.DataFrame(
        {
            "chunk_id": ["c1", "c2", "c3"],
            "token_ids": [[101, 7592], [], [2023, 2003, 1037]],
            "source": [{"file": "a.pdf", "page": 1}, {"file": "b.pdf", "page": 4}, {"file": None, "page": None}],
            "embedding_norm": [1.0, np.nan, 0.75],
        }
    )
    output, input_ = contexts(tenants_instance, "document_chunks", "acme")
    manager.handle_output(output, frame)
    loaded = manager.load_input(input_)
    frame.to_parquet(tmp_path / "local.parquet", index=False)
    pd.testing.assert_frame_equal(loaded, pd.read_parquet(tmp_path / "local.parquet"))
    assert [list(ids) for ids in loaded["token_ids"]] == [[101, 7592], [], [2023, 2003, 1037]]
    assert loaded["source"][1] == {"file": "b.pdf", "page": 4} and np.isnan(loaded["embedding_norm"][1])
    path = output.get_logged_metadata()["path"]
    assert getattr(path, "value", path) == manager.store.url("acme", "v2024-01", "document_chunks")


def test_object_key_is_prefix_tenant_version_asset(manager, tenants_instance, store_config):
    for tenant in ("acme", "globex"):
        output, _ = contexts(tenants_instance, "chunk_clusters", tenant)
        manager.handle_output(output, pd.DataFrame({"cluster": [1, 2]}))
    root = f"{store_config.bucket}/{store_config.prefix}"
    assert manager.store.fs.find(root) == [
        f"{root}/acme/v2024-01/chunk_clusters.parquet",
        f"{root}/globex/v2024-01/chunk_clusters.parquet",
    ]


def test_one_tenant_never_loads_another_tenants_table(manager, tenants_instance):
    acme_out, acme_in = contexts(tenants_instance, "synthetic_qa", "acme")
    manager.handle_output(acme_out, pd.DataFrame({"question": ["acme's question"]}))
    _, globex_in = contexts(tenants_instance, "synthetic_qa", "globex")
    with pytest.raises(FileNotFoundError, match="materialize it first") as caught:
        manager.load_input(globex_in)
    assert isinstance(caught.value, MissingTableError) and "'globex'" in str(caught.value)
    assert manager.load_input(acme_in)["question"].tolist() == ["acme's question"]


def test_results_tables_and_unpartitioned_assets_are_refused(manager, tenants_instance):
    output, _ = contexts(tenants_instance, "metric_scores", "acme")
    with pytest.raises(ValueError, match="results database"):
        manager.handle_output(output, pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="not partitioned"):
        manager.handle_output(build_output_context(asset_key=AssetKey("raw_documents")), pd.DataFrame({"x": [1]}))
    output, _ = contexts(tenants_instance, "raw_documents", "acme")
    with pytest.raises(TypeError, match="only DataFrames"):
        manager.handle_output(output, {"not": "a frame"})


def test_unreachable_store_fails_when_the_step_starts(store_config):
    endpoint = f"http://127.0.0.1:{_free_ports(1)[0]}"
    began = time.monotonic()
    with pytest.raises(ObjectStoreError, match="cannot connect") as caught:
        factory(store_config, endpoint_url=endpoint).create_io_manager(build_init_resource_context())
    assert time.monotonic() - began < 60  # seconds, never a hang (a loaded machine may take several)
    assert "\n" not in str(caught.value) and endpoint in str(caught.value)
    with pytest.raises(ObjectStoreError, match="does not exist"):
        factory(store_config, base_url="s3://missing-bucket/x").create_io_manager(build_init_resource_context())


def test_base_class_hooks_that_are_overridden_still_exist():
    """Two overrides replace private hooks of UPathIOManager (a probe for stray files, a fallback
    read outside the tenant's prefix); if Dagster renames them, the overrides would silently stop working."""
    for name in ("_handle_transition_to_partitioned_asset", "_get_multipartition_backcompat_paths"):
        assert callable(getattr(UPathIOManager, name, None)), name


@pytest.mark.dagster
def test_materialize_partitioned_assets_through_the_store(store_config, tenants_instance):
    @asset(partitions_def=tenant_version_partitions)
    def document_chunks(context) -> pd.DataFrame:
        tenant = context.partition_key.keys_by_dimension["tenant"]
        return pd.DataFrame({"tenant": [tenant] * 3, "ids": [[1], [2, 3], []], "score": [0.1, np.nan, 0.3]})

    @asset(partitions_def=tenant_version_partitions, ins={"chunks": AssetIn("document_chunks")})
    def chunk_clusters(chunks: pd.DataFrame) -> pd.DataFrame:
        return chunks.assign(cluster=[len(ids) for ids in chunks["ids"]])

    resources = {"io_manager": factory(store_config)}
    for tenant in ("acme", "globex"):
        key = register_partition(tenants_instance, tenant, "v2024-01")
        result = materialize(
            [document_chunks, chunk_clusters], partition_key=key, instance=tenants_instance, resources=resources
        )
        assert result.success
    store = ObjectStore(store_config)
    for tenant in ("acme", "globex"):
        clusters = store.read(tenant, "v2024-01", "chunk_clusters")
        assert clusters["tenant"].tolist() == [tenant] * 3 and clusters["cluster"].tolist() == [1, 2, 0]
    root = f"{store_config.bucket}/{store_config.prefix}"
    assert sorted(store.fs.find(root)) == sorted(
        f"{root}/{tenant}/v2024-01/{name}.parquet"
        for tenant in ("acme", "globex")
        for name in ("document_chunks", "chunk_clusters")
    )
