"""The Dagster code location: every domain's assets, the jobs, and resources on embedded defaults."""

from pathlib import Path

from dagster import Definitions, in_process_executor, load_assets_from_modules

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation.jobs import audit_job, full_pipeline_job, synthesis_job
from rag_eval_pipeline.automation.schedules import SCHEDULES
from rag_eval_pipeline.automation.sensors import SENSORS
from rag_eval_pipeline.evaluation import assets as evaluation_assets
from rag_eval_pipeline.ingest import assets as ingest_assets
from rag_eval_pipeline.reporting import assets as reporting_assets
from rag_eval_pipeline.resources import (
    DocumentsResource,
    EmbedderResource,
    WarehouseIOManager,
    WarehouseResource,
)
from rag_eval_pipeline.resources.judge import judge_from_env
from rag_eval_pipeline.synthesis import assets as synthesis_assets
from rag_eval_pipeline.reporting.checks import REPORTING_CHECKS
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS


ALL_ASSETS = load_assets_from_modules([ingest_assets, synthesis_assets, evaluation_assets, reporting_assets])


def local_resources(documents_root: Path, warehouse_root: Path) -> dict:
    """Everything on local disk: tenant folders, Parquet tables, the embedding and judge caches; the judge from env."""
    embedder = EmbedderResource(cache_path=str(Path(warehouse_root) / "embedding_cache.sqlite"))
    return {
        "io_manager": WarehouseIOManager(root=str(warehouse_root)),
        "warehouse": WarehouseResource(root=str(warehouse_root)),
        "documents": DocumentsResource(root=str(documents_root)),
        "embedder": embedder,
        "judge": judge_from_env(embedder, str(Path(warehouse_root) / "judge_cache.sqlite")),
    }


def build_definitions() -> Definitions:
    """Definitions with resources at the locations the environment names now (see settings)."""
    return Definitions(
        assets=ALL_ASSETS,
        asset_checks=[*SYNTHESIS_CHECKS, *REPORTING_CHECKS],
        jobs=[full_pipeline_job, synthesis_job, audit_job],
        sensors=SENSORS,
        schedules=SCHEDULES,
        resources=local_resources(settings.documents_root(), settings.warehouse_root()),
        # The multiprocess executor costs about 3 s per step on 2 cores; these steps are short.
        executor=in_process_executor,
    )


defs = build_definitions()
