"""The Dagster code location: every domain's definitions merged, with the jobs, sensors, schedules and
resources on embedded defaults."""

from pathlib import Path

from dagster import Definitions, EnvVar, in_process_executor

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation.jobs import audit_job, full_pipeline_job, synthesis_job
from rag_eval_pipeline.automation.run_health import dead_run_sensor
from rag_eval_pipeline.automation.schedules import SCHEDULES
from rag_eval_pipeline.automation.sensors import SENSORS
from rag_eval_pipeline.core.defaults import EMBEDDING_CACHE_FILE
from rag_eval_pipeline.evaluation import definitions as evaluation
from rag_eval_pipeline.ingest import definitions as ingest
from rag_eval_pipeline.reporting import definitions as reporting
from rag_eval_pipeline.resources import (
    DocumentsResource,
    EmbedderResource,
    RunLivenessResource,
    WarehouseIOManager,
    WarehouseResource,
)
from rag_eval_pipeline.resources.judge import JudgeResource
from rag_eval_pipeline.resources.judge_nodes import judge_on_nodes
from rag_eval_pipeline.resources.liveness import RUN_LIVENESS_KEY
from rag_eval_pipeline.resources.production import ProductionIOManager
from rag_eval_pipeline.synthesis import definitions as synthesis

# In lineage order: documents, golden set, audit, report. The modules, not their `defs`: the code
# location must hold a single Definitions object at module scope.
DOMAINS = [ingest.defs, synthesis.defs, evaluation.defs, reporting.defs]
ALL_ASSETS = [asset for domain in DOMAINS for asset in domain.assets or ()]


def local_resources(documents_root: Path, warehouse_root: Path) -> dict:
    """Everything on local disk: tenant folders, Parquet tables, the embedding and judge caches; the judge from env."""
    embedder = EmbedderResource(cache_path=str(Path(warehouse_root) / EMBEDDING_CACHE_FILE))
    current = settings.load()
    return {
        "io_manager": WarehouseIOManager(root=str(warehouse_root)),
        "warehouse": WarehouseResource(root=str(warehouse_root)),
        "documents": DocumentsResource(root=str(documents_root)),
        "embedder": embedder,
        "judge": judge_on_nodes(  # on judge nodes the run starts, when RAG_EVAL_VLLM_MODEL is set
            JudgeResource.from_settings(current.judge, embedder, str(Path(warehouse_root) / settings.JUDGE_CACHE_FILE)),
            current,
        ),
        RUN_LIVENESS_KEY: RunLivenessResource(),
    }


def production_resources(current: settings.Settings) -> dict:
    """Production mode: results in Postgres, large tables in the object store, caches in Redis; the
    secrets (database URL, object store keys, a Redis URL's password) are read from the environment where
    the run executes, so the UI and the run's config show only their variables' names."""
    production = current.production
    variable = settings.PRODUCTION_VARIABLES
    shared_cache = EnvVar(variable["cache_url"]) if production.cache_url else None
    embedder = EmbedderResource(cache_path=shared_cache or str(current.warehouse_root / EMBEDDING_CACHE_FILE))
    database_url = EnvVar(variable["database_url"])
    object_store = (
        {
            "object_store_url": production.object_store_url,
            "object_store_endpoint": production.object_store_endpoint,
            "access_key_id": EnvVar("AWS_ACCESS_KEY_ID"),
            "secret_access_key": EnvVar("AWS_SECRET_ACCESS_KEY"),
        }
        if production.object_store_url
        else {}
    )
    judge_cache = shared_cache if current.judge.cache == production.cache_url else current.judge.cache
    return {
        "io_manager": ProductionIOManager(database_url=database_url, root=str(current.warehouse_root), **object_store),
        "warehouse": WarehouseResource(root=str(current.warehouse_root), database_url=database_url),
        "documents": DocumentsResource(root=str(current.documents_root)),
        "embedder": embedder,
        "judge": judge_on_nodes(JudgeResource.from_settings(current.judge, embedder, judge_cache), current),
        RUN_LIVENESS_KEY: RunLivenessResource(),
    }


def build_definitions() -> Definitions:
    """Definitions with resources at the locations the environment names now (see settings)."""
    current = settings.load()
    return Definitions.merge(
        *DOMAINS,
        Definitions(
            jobs=[full_pipeline_job, synthesis_job, audit_job],
            sensors=[*SENSORS, dead_run_sensor],
            schedules=SCHEDULES,
            resources=production_resources(current)
            if current.production.enabled
            else local_resources(current.documents_root, current.warehouse_root),
            # The multiprocess executor costs about 3 s per step on 2 cores; these steps are short.
            executor=in_process_executor,
        ),
    )


defs = build_definitions()
