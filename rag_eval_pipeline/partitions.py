"""Tenant x dataset_version partitions, and the validation Dagster does not do for us.

Dagster accepts any string as a dynamic partition key, so a typo would silently create a new
partition. Every name goes through `validate_name` before it is registered or used.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from dagster import (
    AssetChecksDefinition,
    DagsterInstance,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    PreviewWarning,
    asset_check,
)

from rag_eval_pipeline.core.names import PartitionNameError, validate_name

TENANT_DIM = "tenant"
VERSION_DIM = "dataset_version"

# The dimensions' names, as the instance files their dynamic partitions (a definition's .name may be None).
TENANTS, DATASET_VERSIONS = "tenant", "dataset_version"
tenant_partitions = DynamicPartitionsDefinition(name=TENANTS)
dataset_version_partitions = DynamicPartitionsDefinition(name=DATASET_VERSIONS)

tenant_version_partitions = MultiPartitionsDefinition(
    {TENANT_DIM: tenant_partitions, VERSION_DIM: dataset_version_partitions}
)

PARTITIONED_CHECK_WARNING = "Specifying a partitions_def on an AssetCheckSpec"


def partitioned_asset_check(**kwargs) -> Callable[[Callable], AssetChecksDefinition]:
    """`@asset_check` on the (tenant, dataset_version) partitions: one result per pair, key in context.

    Partitioned checks are a "preview" feature of Dagster 1.13 (dagster is pinned); without them a
    check records one result for all pairs. Its warning is silenced while the check is defined, and
    nowhere else: importing this module changes no warning filter.
    """

    def decorate(fn: Callable) -> AssetChecksDefinition:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=PARTITIONED_CHECK_WARNING, category=PreviewWarning)
            return asset_check(partitions_def=tenant_version_partitions, **kwargs)(fn)

    return decorate


def partition_key(tenant: str, dataset_version: str) -> MultiPartitionKey:
    """Always build keys as objects: the string form orders dimensions by name, not by meaning."""
    return MultiPartitionKey(
        {
            TENANT_DIM: validate_name("tenant", tenant),
            VERSION_DIM: validate_name("dataset version", dataset_version),
        }
    )


def register_partition(instance: DagsterInstance, tenant: str, dataset_version: str) -> MultiPartitionKey:
    """Validate both names and add them to the instance's dynamic partitions (idempotent)."""
    key = partition_key(tenant, dataset_version)
    for dimension, name in ((TENANTS, tenant), (DATASET_VERSIONS, dataset_version)):
        if not instance.has_dynamic_partition(dimension, name):
            instance.add_dynamic_partitions(dimension, [name])
    return key


def require_registered(instance: DagsterInstance, tenant: str, dataset_version: str) -> MultiPartitionKey:
    """The key for a registered (tenant, version), or a clear error naming what is registered."""
    key = partition_key(tenant, dataset_version)
    for kind, dimension, name in (("tenant", TENANTS, tenant), ("dataset version", DATASET_VERSIONS, dataset_version)):
        if not instance.has_dynamic_partition(dimension, name):
            known = ", ".join(sorted(instance.get_dynamic_partitions(dimension))) or "none"
            raise PartitionNameError(
                f"unknown {kind} {name!r} (registered: {known}); register it first with "
                f"`rag-eval register --tenant {tenant} --version {dataset_version}`"
            )
    return key


def split_key(key: MultiPartitionKey | str) -> tuple[str, str]:
    """(tenant, dataset_version) of a partition key, revalidated."""
    if not isinstance(key, MultiPartitionKey):
        key = tenant_version_partitions.get_partition_key_from_str(key)
    dims = key.keys_by_dimension
    return (
        validate_name("tenant", dims[TENANT_DIM]),
        validate_name("dataset version", dims[VERSION_DIM]),
    )
