"""Jobs over the lineage: the whole path, the synthesis track and the auditing track."""

from dagster import AssetSelection, define_asset_job

from rag_eval_pipeline.stores.layout import AUDIT_TABLES, SYNTHESIS_TABLES

# Every table the synthesis steps write: a step that writes several tables builds them all at once.
SYNTHESIS_ASSETS = list(SYNTHESIS_TABLES)
AUDIT_ASSETS = list(AUDIT_TABLES)

full_pipeline_job = define_asset_job(
    "full_pipeline",
    selection=AssetSelection.assets(*SYNTHESIS_ASSETS, *AUDIT_ASSETS),
    description="Documents to regression report for one (tenant, dataset_version).",
)
synthesis_job = define_asset_job(
    "synthesis",
    selection=AssetSelection.assets(*SYNTHESIS_ASSETS),
    description="Documents to verified golden set.",
)
audit_job = define_asset_job(
    "audit",
    selection=AssetSelection.assets(*AUDIT_ASSETS),
    description="Run a candidate over the golden set, score it, compare with the baseline.",
)
