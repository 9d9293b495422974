"""The warehouse as a Dagster resource, and the IO manager that stores every asset as Parquet."""

from __future__ import annotations

import pandas as pd
from dagster import ConfigurableIOManager, ConfigurableResource, InputContext, OutputContext

from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.warehouse import Warehouse


class WarehouseResource(ConfigurableResource):
    root: str

    def store(self) -> Warehouse:
        return Warehouse(self.root)


class WarehouseIOManager(ConfigurableIOManager):
    """`<root>/<tenant>/<dataset_version>/<asset>.parquet`."""

    root: str

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        tenant, version = split_key(context.asset_partition_key)
        path = Warehouse(self.root).write(tenant, version, context.asset_key.path[-1], obj)
        context.add_output_metadata({"path": str(path)})

    def load_input(self, context: InputContext) -> pd.DataFrame:
        tenant, version = split_key(context.asset_partition_key)
        return Warehouse(self.root).read(tenant, version, context.asset_key.path[-1])
