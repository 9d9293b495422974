"""Production mode's storage: the results in Postgres (row-level security), the large tables in an object store.

Nothing is kept on a worker's disk, so any worker can run any step of any run.
"""

from __future__ import annotations

import os

import pandas as pd
from dagster import ConfigurableIOManager, InputContext, OutputContext

from rag_eval_pipeline.resources.object_store import ObjectStoreUPathIOManager
from rag_eval_pipeline.resources.warehouse import loaded_table, read_table, store_output, write_table
from rag_eval_pipeline.stores import results_database
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.object_store import ObjectStoreSettings, shared_object_store
from rag_eval_pipeline.stores.version_tables import VersionTables

# The evaluation records (what a gate, a baseline and a person reviewing a golden set read): in the
# results database. Every other table is a large intermediate one: in the object store.
RESULT_TABLES = frozenset({"golden_set", "rejected_qa", "candidate_outputs", "metric_scores", "regression_report"})


class ProductionIOManager(ConfigurableIOManager):
    """Results tables as tenant-scoped rows in Postgres; documents, chunks, clusters and synthetic QA as
    `<prefix>/<tenant>/<version>/<asset>.parquet` objects through Dagster's UPath IO manager (in the
    local warehouse at `root` while no object store is set: one machine only)."""

    database_url: str
    root: str
    object_store_url: str = ""
    object_store_endpoint: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""

    def version_tables(self) -> VersionTables:
        """The results database keeps the manifest and the version's lock, so the writes to the object store
        take the same lock as those to the database."""
        large = self._object_store().store if self.object_store_url else Warehouse(self.root)
        return VersionTables(results=self._database(), large=large, result_tables=RESULT_TABLES)

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        store_output(self.version_tables(), context, obj, lambda frame: self._write(context, frame))

    def load_input(self, context: InputContext) -> pd.DataFrame:
        name = context.asset_key.path[-1]
        if name in RESULT_TABLES:
            frame = read_table(self._database(), context)
        elif self.object_store_url:
            frame = self._object_store().load_input(context)
        else:
            frame = read_table(Warehouse(self.root), context)
        return loaded_table(context, frame)

    def _write(self, context: OutputContext, frame: pd.DataFrame) -> None:
        if context.asset_key.path[-1] in RESULT_TABLES:
            write_table(self._database(), context, frame)
        elif self.object_store_url:
            self._object_store().handle_output(context, frame)
        else:
            write_table(Warehouse(self.root), context, frame)

    def _database(self) -> DatabaseStore:
        return DatabaseStore(results_database(self.database_url, os.getpid()))

    def _object_store(self) -> ObjectStoreUPathIOManager:
        return ObjectStoreUPathIOManager(
            shared_object_store(
                ObjectStoreSettings(
                    base_url=self.object_store_url,
                    endpoint_url=self.object_store_endpoint,
                    access_key_id=self.access_key_id,
                    secret_access_key=self.secret_access_key,
                )
            )
        )
