"""Which key -> blob store a cache location names: a Redis URL shared by every worker (production), a
SQLite file (the embedded default), or nothing for a store in memory.

The embedding cache and the judge-call cache open their store here, so `RAG_EVAL_JUDGE_CACHE` or an
embedder's cache_path may be a `redis://` URL with no other change; the keys are the same in every store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from rag_eval_pipeline.stores.redis_cache import CacheUnavailable, RedisCache, redacted
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache

__all__ = ["CacheStore", "CacheUnavailable", "open_cache", "is_url"]

REDIS_SCHEMES = ("redis", "rediss")


class CacheStore(Protocol):
    path: str  # where the entries live, fit for messages; "" when in memory

    def get(self, key: str) -> bytes | None: ...
    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]: ...
    def put(self, key: str, value: bytes) -> None: ...
    def put_many(self, items: Mapping[str, bytes]) -> None: ...
    def adopt(self, old_table: str, select: str) -> None: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


def open_cache(location: str | Path | None, table: str) -> CacheStore:
    """A RedisCache for a redis:// or rediss:// URL, a SqliteCache for a file path, and an in-memory
    SqliteCache for None or ''."""
    if not location:
        return SqliteCache(None, table)
    if isinstance(location, str) and is_url(location):
        scheme = location.partition("://")[0].lower()
        if scheme not in REDIS_SCHEMES:
            raise ValueError(
                f"cache location {redacted(location)}: a URL must be redis:// or rediss://, else give a file path"
            )
        return RedisCache(location, table)
    return SqliteCache(location, table)


def is_url(location: str) -> bool:
    # Any scheme counts, so that a mistyped URL is refused rather than made into a file of that name.
    scheme, separator, _ = location.partition("://")
    return bool(separator) and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()
