"""The judge as a resource. Offline by default; the LLM judge plugs in behind the same interface."""

from __future__ import annotations

from dagster import ConfigurableResource

from rag_eval_pipeline.evaluation.judge import Judge, OfflineJudge
from rag_eval_pipeline.resources.embedder import EmbedderResource


class JudgeResource(ConfigurableResource):
    embedder: EmbedderResource
    coverage_threshold: float = 0.75

    def get(self) -> Judge:
        return OfflineJudge(self.embedder.get(), coverage_threshold=self.coverage_threshold)
