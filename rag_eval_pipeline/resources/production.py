"""Production mode's storage: the results in Postgres (row-level security), the large tables in an object store.

Nothing is kept on a worker's disk, so any worker can run any step of any run.
"""

from __future__ import annotations

import pandas as pd
from dagster import ConfigurableIOManager, InputContext, OutputContext

from rag_eval_pipeline.core.database.results import DatabaseStore
from rag_eval_pipeline.core.object_store import ObjectStore, ObjectStoreConfig
from rag_eval_pipeline.core.warehouse import Warehouse
from rag_eval_pipeline.resources.warehouse import read_table, results_database, write_table

# The evaluation records (what a gate, a baseline and a person reviewing a golden set read): in the
# results database. Every other table is a large intermediate one: in the object store.
RESULT_TABLES = frozenset({"golden_set", "rejected_qa", "candidate_outputs", "metric_scores", "regression_report"})


class ProductionIOManager(ConfigurableIOManager):
    """Results tables as tenant-scoped rows in Postgres; documents, chunks, clusters and synthetic QA as
    `<prefix>/<tenant>/<version>/<asset>.parquet` objects (in the local warehouse at `root` while no
    object store is set: one machine only)."""

    database_url: str
    root: str
    object_store_url: str = ""
    object_store_endpoint: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        write_table(self._store_of(context.asset_key.path[-1]), context, obj)

    def load_input(self, context: InputContext) -> pd.DataFrame:
        return read_table(self._store_of(context.asset_key.path[-1]), context)

    def _store_of(self, name: str):
        if name in RESULT_TABLES:
            return DatabaseStore(results_database(self.database_url))
        if not self.object_store_url:
            return Warehouse(self.root)
        return ObjectStore(ObjectStoreConfig(
            base_url=self.object_store_url, endpoint_url=self.object_store_endpoint,
            access_key_id=self.access_key_id, secret_access_key=self.secret_access_key,
        ))
