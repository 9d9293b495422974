"""The embedding model as a resource; one model and cache per process."""

from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource

from rag_eval_pipeline.core.embeddings import Embedder


@lru_cache(maxsize=4)
def _embedder(cache_path: str) -> Embedder:
    return Embedder(cache_path or None)


class EmbedderResource(ConfigurableResource):
    cache_path: str = ""  # empty: in-memory cache only

    def get(self) -> Embedder:
        return _embedder(self.cache_path)
