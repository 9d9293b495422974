"""The IO manager that keeps the large intermediate tables in an S3-compatible object store.

Dagster's UPathIOManager resolves the partitions; this subclass puts each table at
`<base_url>/<tenant>/<dataset_version>/<asset>.parquet` (the local warehouse's layout) and does every
read and write through `core.object_store.ObjectStore`: one PUT per table, one GET per read, and one
`ObjectStoreError` line when the store cannot be used. The results (audit) tables belong to the
results database and are refused here.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from dagster import ConfigurableIOManagerFactory, InitResourceContext, InputContext, OutputContext, UPathIOManager
from pydantic import Field
from upath import UPath

from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.stores.layout import AUDIT_TABLES
from rag_eval_pipeline.stores.object_store import ObjectStore, ObjectStoreSettings


class ObjectStoreUPathIOManager(UPathIOManager):
    extension = ".parquet"

    def __init__(self, store: ObjectStore):
        self.store = store
        super().__init__(base_path=UPath(store.config.base_url, **store.config.storage_options()))

    # -- where a table lives ---------------------------------------------------------------------

    def get_path_for_partition(self, context: InputContext | OutputContext, path: UPath, partition: str) -> UPath:
        """`<base>/<tenant>/<version>/<asset>` (the extension is added by the caller).

        `partition` is Dagster's rendering of the key: the dimension values ordered by dimension name
        and joined by '/', the order of the key's string form (joined by '|'), which `split_key` parses
        back into validated names."""
        tenant, version = split_key(partition.replace("/", "|"))
        return self._base_path / tenant / version / _table_name(context)

    def _locate(self, path: UPath) -> tuple[str, str, str]:
        """(tenant, version, table) of a path built by `get_path_for_partition`."""
        tenant, version, filename = path.parts[-3:]
        return tenant, version, filename.removesuffix(self.extension or "")

    # -- reads and writes --------------------------------------------------------------------------

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        _check_table(context)
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(
                f"{context.asset_key.to_user_string()} returned {type(obj).__name__}: "
                "the object store keeps only DataFrames"
            )
        super().handle_output(context, obj)

    def load_input(self, context: InputContext) -> Any:
        _check_table(context)
        return super().load_input(context)

    def dump_to_path(self, context: OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        self.store.write(*self._locate(path), obj)

    def load_from_path(self, context: InputContext, path: UPath) -> pd.DataFrame:
        return self.store.read(*self._locate(path))  # MissingTableError (a FileNotFoundError) when absent

    def path_exists(self, path: UPath) -> bool:
        return self.store.exists(*self._locate(path))

    def unlink(self, path: UPath) -> None:
        self.store.delete(*self._locate(path))

    # -- what the base class does for file systems with folders -------------------------------------

    def make_directory(self, path: UPath) -> None:
        """S3 has no folders to create."""

    def _handle_transition_to_partitioned_asset(self, context: OutputContext, path: UPath) -> None:
        """No folders, so no stray file in a partition folder's place to probe for (2 requests a write)."""

    def _get_multipartition_backcompat_paths(self, context: InputContext | OutputContext) -> dict:
        """No fallback read: the base class would try an old Dagster layout outside the tenant's prefix."""
        return {}


class ObjectStoreIOManager(ConfigurableIOManagerFactory):
    """The intermediate tables in an S3-compatible store (production mode): every worker reads what
    another wrote. Pass the secrets as `EnvVar`s. The store is checked when a step starts, so a
    misconfigured or unreachable one fails before the step computes, in one line."""

    base_url: str = Field(description="s3://bucket/prefix: tables go to <prefix>/<tenant>/<version>/<asset>.parquet")
    endpoint_url: str = Field(description="The S3-compatible server, e.g. http://127.0.0.1:8333")
    access_key_id: str = Field(description="S3 access key id")
    secret_access_key: str = Field(description="S3 secret access key")

    def object_store(self) -> ObjectStore:
        return ObjectStore(
            ObjectStoreSettings(
                base_url=self.base_url,
                endpoint_url=self.endpoint_url,
                access_key_id=self.access_key_id,
                secret_access_key=self.secret_access_key,
            )
        )

    def create_io_manager(self, context: InitResourceContext) -> ObjectStoreUPathIOManager:
        store = self.object_store()
        store.check()
        return ObjectStoreUPathIOManager(store)


def _table_name(context: InputContext | OutputContext) -> str:
    return context.asset_key.path[-1]


def _check_table(context: InputContext | OutputContext) -> None:
    """Only (tenant, dataset_version) partitions of intermediate tables: anything else has no key here."""
    name = context.asset_key.to_user_string() if context.has_asset_key else "an op output"
    if not context.has_asset_key or not context.has_asset_partitions:
        raise ValueError(
            f"{name} is not partitioned by tenant and dataset version: the object store keeps only such tables"
        )
    if _table_name(context) in AUDIT_TABLES:
        raise ValueError(f"{name} is a results table: it belongs to the results database, not the object store")
