"""Jobs over the lineage: the whole path, the synthesis track and the auditing track."""

from dagster import AssetSelection, define_asset_job

# Every table the synthesis steps write: a step that writes several tables builds them all at once.
SYNTHESIS_ASSETS = [
    "raw_documents", "rejected_documents",
    "document_chunks",
    "chunk_clusters",
    "synthetic_qa", "generation_failures", "generation_plan",
    "golden_set", "rejected_qa", "synthesis_plan",
]
AUDIT_ASSETS = ["candidate_outputs", "metric_scores", "regression_report"]

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
