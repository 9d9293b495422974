"""Tell Dagster about tables written outside a run, so the UI shows them as built.

`rag-eval review import` writes a new dataset version's golden set (and its rejected items) without a
Dagster run; without a recorded materialization the UI would show that partition as never built.
"""

from __future__ import annotations

import pandas as pd
from dagster import AssetMaterialization, DagsterInstance

from rag_eval_pipeline.metadata import table_metadata
from rag_eval_pipeline.partitions import partition_key

# The columns each imported table's preview shows, as the assets that normally build them show.
PREVIEW_COLUMNS = {
    "golden_set": ["qa_id", "question_type", "quality_score", "question"],
    "rejected_qa": ["qa_id", "stage", "reason"],
}
DEFAULT_PREVIEW_WIDTH = 4


def record_imported_version(
    instance: DagsterInstance, tenant: str, version: str, tables: dict[str, pd.DataFrame], description: str
) -> None:
    """One runless materialization per table, in the (tenant, version) partition."""
    key = partition_key(tenant, version)
    for name, frame in tables.items():
        instance.report_runless_asset_event(
            AssetMaterialization(
                asset_key=name,
                partition=str(key),
                metadata=table_metadata(frame, _preview_columns(name, frame)),
                description=description,
            )
        )


def _preview_columns(name: str, frame: pd.DataFrame) -> list[str]:
    wanted = PREVIEW_COLUMNS.get(name, [])
    present = [column for column in wanted if column in frame.columns]
    return present or list(frame.columns[:DEFAULT_PREVIEW_WIDTH])
