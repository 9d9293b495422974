"""The warehouse as a Dagster resource, and the IO manager that stores every asset as Parquet."""

from __future__ import annotations

import pandas as pd
from dagster import ConfigurableIOManager, ConfigurableResource, InputContext, OutputContext

from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.core.files import atomic_write_parquet
from rag_eval_pipeline.core.warehouse import AUDIT_TABLES, Warehouse


class WarehouseResource(ConfigurableResource):
    root: str

    def store(self) -> Warehouse:
        return Warehouse(self.root)


class WarehouseIOManager(ConfigurableIOManager):
    """`<root>/<tenant>/<dataset_version>/<asset>.parquet`; the audit tables one folder deeper,
    `audits/commit=<commit>/run=<run_id>/<asset>.parquet`, so each audit reads only its own rows."""

    root: str

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        tenant, version = split_key(context.asset_partition_key)
        name = context.asset_key.path[-1]
        warehouse = Warehouse(self.root)
        if name in AUDIT_TABLES:
            folder = warehouse.audit_dir(tenant, version, _commit(context), context.run_id)
            path = atomic_write_parquet(folder / f"{name}.parquet", obj)
        else:
            path = warehouse.write(tenant, version, name, obj)
        context.add_output_metadata({"path": str(path)})

    def load_input(self, context: InputContext) -> pd.DataFrame:
        tenant, version = split_key(context.asset_partition_key)
        name = context.asset_key.path[-1]
        warehouse = Warehouse(self.root)
        if name not in AUDIT_TABLES:
            return warehouse.read(tenant, version, name)
        run_id = context.upstream_output.run_id if context.upstream_output else context.step_context.run_id
        folder = warehouse.find_audit_dir(tenant, version, run_id)
        if folder is None or not (folder / f"{name}.parquet").is_file():
            raise FileNotFoundError(
                f"no {name!r} table of run {run_id} for {tenant}/{version}: the audit tables are kept per commit "
                "and run, so materialize candidate_outputs, metric_scores and regression_report in one run"
            )
        return pd.read_parquet(folder / f"{name}.parquet")


def _commit(context: OutputContext) -> str:
    """The audited commit, which every audit asset states in its output metadata."""
    value = context.output_metadata.get("commit")
    value = getattr(value, "value", value)
    if not value:
        raise ValueError(f"{context.asset_key.to_user_string()} did not say which commit it audited")
    return str(value)
