"""Tenant x dataset_version partition names, keys and registration on a real (ephemeral) Dagster instance."""

from __future__ import annotations

import pytest
from dagster import MultiPartitionKey

from rag_eval_pipeline.core.names import PartitionNameError, validate_name
from rag_eval_pipeline.partitions import (
    TENANT_DIM,
    VERSION_DIM,
    partition_key,
    register_partition,
    require_registered,
    split_key,
)


@pytest.mark.parametrize("name", ["acme", "a", "demo-2026_q1", "0", "-", "x" * 63])
def test_validate_name_accepts_lowercase_slugs(name):
    assert validate_name("tenant", name) == name


@pytest.mark.parametrize(
    "name",
    ["Acme", "acme corp", "x" * 64, "", "acme/v1", "acme\n", "acme.v1", "café", " acme", None, 42],
)
def test_validate_name_rejects_malformed_names(name):
    with pytest.raises(PartitionNameError) as error:
        validate_name("tenant", name)

    assert isinstance(error.value, ValueError)
    assert "invalid tenant name" in str(error.value)
    assert repr(name) in str(error.value)


def test_partition_key_has_both_dimensions():
    key = partition_key("acme", "v1")

    assert isinstance(key, MultiPartitionKey)
    assert key.keys_by_dimension == {TENANT_DIM: "acme", VERSION_DIM: "v1"}
    assert split_key(key) == ("acme", "v1")
    assert split_key(str(key)) == ("acme", "v1")  # the string form orders dims by name, split_key undoes it


@pytest.mark.parametrize("tenant, version, kind", [("Acme", "v1", "tenant"), ("acme", "v 1", "dataset version")])
def test_partition_key_validates_both_names(tenant, version, kind):
    with pytest.raises(PartitionNameError, match=f"invalid {kind} name"):
        partition_key(tenant, version)


def test_register_then_require(instance):
    key = register_partition(instance, "acme", "v1")

    assert key == partition_key("acme", "v1")
    assert require_registered(instance, "acme", "v1") == key
    assert instance.get_dynamic_partitions("tenant") == ["acme"]
    assert instance.get_dynamic_partitions("dataset_version") == ["v1"]


def test_register_is_idempotent_and_dimensions_are_independent(instance):
    register_partition(instance, "acme", "v1")
    register_partition(instance, "acme", "v1")
    register_partition(instance, "beta", "v2")

    assert sorted(instance.get_dynamic_partitions("tenant")) == ["acme", "beta"]
    assert sorted(instance.get_dynamic_partitions("dataset_version")) == ["v1", "v2"]
    # Versions are shared across tenants: acme/v2 is a valid combination once both names exist.
    assert require_registered(instance, "acme", "v2").keys_by_dimension == {TENANT_DIM: "acme", VERSION_DIM: "v2"}


def test_register_refuses_invalid_names_without_registering_anything(instance):
    with pytest.raises(PartitionNameError):
        register_partition(instance, "acme", "V1")

    assert instance.get_dynamic_partitions("tenant") == []
    assert instance.get_dynamic_partitions("dataset_version") == []


def test_unknown_tenant_error_names_the_registered_tenants(instance):
    register_partition(instance, "beta", "v1")
    register_partition(instance, "acme", "v1")

    with pytest.raises(PartitionNameError) as error:
        require_registered(instance, "zeta", "v1")

    message = str(error.value)
    assert "unknown tenant 'zeta'" in message
    assert "registered: acme, beta" in message
    assert "rag-eval register --tenant zeta --version v1" in message


def test_unknown_version_error_names_the_registered_versions(instance):
    register_partition(instance, "acme", "v1")
    register_partition(instance, "acme", "v2")

    with pytest.raises(PartitionNameError, match=r"unknown dataset version 'v9' \(registered: v1, v2\)"):
        require_registered(instance, "acme", "v9")


def test_require_on_an_empty_instance_says_none_registered(instance):
    with pytest.raises(PartitionNameError, match=r"registered: none"):
        require_registered(instance, "acme", "v1")


def test_require_validates_names_before_looking_them_up(instance):
    register_partition(instance, "acme", "v1")

    with pytest.raises(PartitionNameError, match="invalid tenant name"):
        require_registered(instance, "ACME", "v1")
