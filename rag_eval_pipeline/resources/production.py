"""Production mode's storage: the results in Postgres (row-level security), the large tables in an object store.

Nothing is kept on a worker's disk, so any worker can run any step of any run.
"""

from __future__ import annotations

import os

import pandas as pd
from dagster import ConfigurableIOManager, InputContext, OutputContext

from rag_eval_pipeline.core.database.results import DatabaseStore
from rag_eval_pipeline.core.object_store import ObjectStoreConfig, shared_object_store
from rag_eval_pipeline.core.warehouse import Warehouse
from rag_eval_pipeline.resources.object_store import ObjectStoreUPathIOManager
from rag_eval_pipeline.resources.warehouse import read_table, results_database, write_table

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

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        name = context.asset_key.path[-1]
        if name in RESULT_TABLES:
            write_table(DatabaseStore(results_database(self.database_url, os.getpid())), context, obj)
        elif self.object_store_url:
            self._object_store().handle_output(context, obj)
        else:
            write_table(Warehouse(self.root), context, obj)

    def load_input(self, context: InputContext) -> pd.DataFrame:
        name = context.asset_key.path[-1]
        if name in RESULT_TABLES:
            return read_table(DatabaseStore(results_database(self.database_url, os.getpid())), context)
        if self.object_store_url:
            return self._object_store().load_input(context)
        return read_table(Warehouse(self.root), context)

    def _object_store(self) -> ObjectStoreUPathIOManager:
        return ObjectStoreUPathIOManager(shared_object_store(ObjectStoreConfig(
            base_url=self.object_store_url, endpoint_url=self.object_store_endpoint,
            access_key_id=self.access_key_id, secret_access_key=self.secret_access_key,
        )))
