"""The Dagster code location: every domain's assets, the jobs, and resources on embedded defaults."""

from dagster import Definitions, in_process_executor, load_assets_from_modules

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation.jobs import audit_job, full_pipeline_job, synthesis_job
from rag_eval_pipeline.evaluation import assets as evaluation_assets
from rag_eval_pipeline.ingest import assets as ingest_assets
from rag_eval_pipeline.reporting import assets as reporting_assets
from rag_eval_pipeline.resources import (
    DocumentsResource,
    EmbedderResource,
    JudgeResource,
    WarehouseIOManager,
    WarehouseResource,
)
from rag_eval_pipeline.synthesis import assets as synthesis_assets


def default_resources() -> dict:
    """Everything local: tenant folders under data/, Parquet under warehouse/, the offline judge."""
    warehouse_root = str(settings.warehouse_root())
    embedder = EmbedderResource(cache_path=str(settings.warehouse_root() / "embedding_cache.sqlite"))
    return {
        "io_manager": WarehouseIOManager(root=warehouse_root),
        "warehouse": WarehouseResource(root=warehouse_root),
        "documents": DocumentsResource(root=str(settings.documents_root())),
        "embedder": embedder,
        "judge": JudgeResource(embedder=embedder),
    }


ALL_ASSETS = load_assets_from_modules([ingest_assets, synthesis_assets, evaluation_assets, reporting_assets])

defs = Definitions(
    assets=ALL_ASSETS,
    jobs=[full_pipeline_job, synthesis_job, audit_job],
    resources=default_resources(),
    # The multiprocess executor costs about 3 s per step on 2 cores; these steps are short.
    executor=in_process_executor,
)
