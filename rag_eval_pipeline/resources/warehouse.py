"""The warehouse as a Dagster resource, and the IO manager that stores every asset as Parquet."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import pandas as pd
from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    DagsterInvariantViolationError,
    InitResourceContext,
    InputContext,
    OutputContext,
)

from rag_eval_pipeline.core.names import RESULTS_IN_DATABASE, RESULTS_TAG
from rag_eval_pipeline.partitions import split_key
from rag_eval_pipeline.stores import open_stores
from rag_eval_pipeline.stores.layout import AUDIT_TABLES, STORED_BY_ASSET, SYNTHESIS_TABLES
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.protocols import BaselineStore, ResultsStore
from rag_eval_pipeline.stores.version_tables import Lineage, VersionTables, drop_lineage, stamped, table_digest
from rag_eval_pipeline.synthesis.versions import must_write


class WarehouseResource(ConfigurableResource):
    """Where the results are (stores.open_stores): the local warehouse, or with `database_url` (production
    mode) the results database."""

    root: str
    database_url: str = ""

    def store(self) -> ResultsStore:
        return open_stores(self.root, self.database_url).results

    def baselines(self) -> BaselineStore:
        return open_stores(self.root, self.database_url).baselines


class WarehouseIOManager(ConfigurableIOManager):
    """`<root>/<tenant>/<dataset_version>/<asset>.parquet`; the audit tables one folder deeper,
    `audits/commit=<commit>/run=<run_id>/<asset>.parquet`, so each audit reads only its own rows."""

    root: str

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Refuse a run submitted in production mode on a worker set up without the results database: its
        results would stay on this machine's disk, where no gate reads them."""
        run = context.run
        if run is not None and run.tags.get(RESULTS_TAG) == RESULTS_IN_DATABASE:
            raise RuntimeError(
                f"run {run.run_id} was submitted in production mode but this worker has no "
                "RAG_EVAL_DATABASE_URL: set the production variables on every worker"
            )

    def version_tables(self) -> VersionTables:
        warehouse = Warehouse(self.root)
        return VersionTables(results=warehouse, large=warehouse)

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        warehouse = Warehouse(self.root)
        store_output(self.version_tables(), context, obj, lambda frame: write_table(warehouse, context, frame))

    def load_input(self, context: InputContext) -> pd.DataFrame:
        return loaded_table(context, read_table(Warehouse(self.root), context))


# ---- what every IO manager does around its own reads and writes ---------------------------------

# The digest of each version table a step has read, by step execution: the lineage of what it writes.
# Weak keys: an entry goes with its step's context.
_READ_BY_STEP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_READ_LOCK = threading.Lock()


def store_output(
    tables: VersionTables, context: OutputContext, frame: pd.DataFrame, write: Callable[[pd.DataFrame], None]
) -> None:
    """An asset's table through `write` (the IO manager's own), with the rules of versions.

    Audit tables are per commit and run: written as they come. The synthesis tables belong to the version:
    each is stamped with its lineage (this step, this run, the tables it read) and written under the
    version's lock, and only while the version is unpublished. A published version keeps every one: the same
    content again is not written, other content is refused before anything is written.
    """
    name = context.asset_key.path[-1]
    if name not in SYNTHESIS_TABLES or not isinstance(frame, pd.DataFrame):  # audit tables: per commit and run
        write(frame)
        return
    tenant, version = split_key(context.asset_partition_key)
    frame = stamped(frame, Lineage(step=context.step_key, run_id=context.run_id, inputs=_tables_read(context)))
    with tables.version_lock(tenant, version):
        if must_write(tables, tenant, version, name, frame):
            write(frame)
            return
    context.add_output_metadata(
        {"published": f"unchanged: {tenant}/{version} is published with this {name}; nothing was written"}
    )


def loaded_table(context: InputContext, frame: pd.DataFrame) -> pd.DataFrame:
    """A table an IO manager read for a step: its digest is remembered (the lineage of what the step
    writes), and the step gets it without the lineage it carries."""
    name = context.asset_key.path[-1]
    step = _step_of(context)
    if name not in AUDIT_TABLES and step is not None and isinstance(frame, pd.DataFrame):
        digest = table_digest(frame)
        with _READ_LOCK:
            _READ_BY_STEP.setdefault(step, {})[name] = digest
    return drop_lineage(frame) if isinstance(frame, pd.DataFrame) else frame


def _tables_read(context: OutputContext) -> dict[str, str]:
    step = _step_of(context)
    with _READ_LOCK:
        return dict(_READ_BY_STEP.get(step, {})) if step is not None else {}


def _step_of(context: InputContext | OutputContext):
    """The step execution the context belongs to; None outside a run (a context built by hand)."""
    try:
        return context.step_context
    except DagsterInvariantViolationError:
        return None


def write_table(store, context: OutputContext, frame: pd.DataFrame) -> None:
    """An asset's table into the store (a Warehouse or the results database): the audit tables under
    their commit and run, the others under their partition."""
    tenant, version = split_key(context.asset_partition_key)
    name = context.asset_key.path[-1]
    if _metadata(context, STORED_BY_ASSET):
        # The asset stored it itself, before a step that must come after it (the report, before a promotion):
        # writing it again could only fail after that step, and turn a finished gate into an error.
        return
    if name in AUDIT_TABLES:
        where = store.write_audit_table(tenant, version, _commit(context), context.run_id, name, frame)
    else:
        where = store.write(tenant, version, name, frame)
    context.add_output_metadata({"path": str(where)})


def read_table(store, context: InputContext) -> pd.DataFrame:
    tenant, version = split_key(context.asset_partition_key)
    name = context.asset_key.path[-1]
    if name not in AUDIT_TABLES:
        return store.read(tenant, version, name)
    run_id = context.upstream_output.run_id if context.upstream_output else context.step_context.run_id
    frame = store.read_audit_table(tenant, version, run_id, name)
    if frame is None:
        raise FileNotFoundError(
            f"no {name!r} table of run {run_id} for {tenant}/{version}: the audit tables are kept per commit "
            "and run, so materialize candidate_outputs, metric_scores and regression_report in one run"
        )
    return frame


def _metadata(context: OutputContext, key: str):
    value = context.output_metadata.get(key)
    return getattr(value, "value", value)


def _commit(context: OutputContext) -> str:
    """The audited commit, which every audit asset states in its output metadata."""
    value = _metadata(context, "commit")
    if not value:
        raise ValueError(f"{context.asset_key.to_user_string()} did not say which commit it audited")
    return str(value)
