"""Dagster resources, thin configurable wrappers around the pure core: the warehouse and its IO manager,
the documents root, the embedding model, the judge, the run's liveness heartbeat, and production mode's
storage (results in Postgres, the large tables in an object store)."""

from rag_eval_pipeline.resources.documents import DocumentsResource
from rag_eval_pipeline.resources.embedder import EmbedderResource
from rag_eval_pipeline.resources.judge import JudgeResource
from rag_eval_pipeline.resources.liveness import RunLivenessResource
from rag_eval_pipeline.resources.warehouse import WarehouseIOManager, WarehouseResource

__all__ = [
    "DocumentsResource",
    "EmbedderResource",
    "JudgeResource",
    "RunLivenessResource",
    "WarehouseIOManager",
    "WarehouseResource",
]
