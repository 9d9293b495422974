"""The caches' storage: which key -> blob store a location names, whose entries a cache sees, and the
checks an entry passes before it is trusted.

Location: a Redis URL shared by every worker (production), a SQLite file (the embedded default), or
nothing for a store in memory. The embedding cache and the judge-call cache open theirs here, so
`RAG_EVAL_JUDGE_CACHE` or an embedder's cache_path may be a `redis://` URL with no other change.

Namespace: every entry belongs to one. `tenant:<name>` holds one tenant's entries: by default a tenant's
runs read, write and count only those. `shared` holds the entries of tools run outside any tenant's run
(`rag-eval evaluate` on a file) and, only when the operator sets RAG_EVAL_CACHE_SHARED_ACROSS_TENANTS, of
every tenant's runs. Which tenant a run's caches belong to is read from the run's partition
(resources/embedder.py).

Integrity: an entry is sealed with the key it was computed for (the model and a hash of the exact
input) and a checksum. An entry sealed for another key, damaged, or holding a value its cache cannot
decode is a miss: the caller computes the value again and overwrites the entry, and the first such entry
of a cache is logged as a warning. The seal is no signature: it catches entries moved between keys and
damaged bytes, not a forger who can write to the store, so only the workers may reach the Redis.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.stores.redis_cache import CacheUnavailable, RedisCache, redacted
from rag_eval_pipeline.stores.sqlite_cache import SqliteCache

__all__ = [
    "CacheStore",
    "CacheUnavailable",
    "CheckedCache",
    "Codec",
    "DamagedEntry",
    "SHARED_NAMESPACE",
    "is_url",
    "namespace_of",
    "open_cache",
    "open_store",
    "seal",
    "unseal",
]

log = logging.getLogger(__name__)

REDIS_SCHEMES = ("redis", "rediss")
SHARED_NAMESPACE = "shared"
_SEAL_MARK = b"rag_eval.cache.v1\n"  # what every sealed entry starts with
_SOURCE_LENGTH_BYTES = 4
_CHECKSUM_BYTES = 16

Value = TypeVar("Value")


class DamagedEntry(ValueError):
    """A cached entry that cannot be trusted; the message says why."""


class CacheStore(Protocol):
    path: str  # where the entries live, fit for messages; "" when in memory
    table: str
    namespace: str  # only this namespace's entries are read, written and counted

    def get(self, key: str) -> bytes | None: ...
    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]: ...
    def put(self, key: str, value: bytes) -> None: ...
    def put_many(self, items: Mapping[str, bytes]) -> None: ...
    def drop_table(self, old_table: str) -> None: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


class Codec(Protocol[Value]):
    """A cache's values as bytes and back; `decode` raises ValueError for bytes that hold no valid value."""

    def encode(self, value: Value) -> bytes: ...
    def decode(self, payload: bytes) -> Value: ...


class CheckedCache(Generic[Value]):
    """A store whose entries are sealed with their key and decoded by a codec on every read: an entry
    that fails either is not returned, so the caller computes the value anew and puts it back."""

    def __init__(self, store: CacheStore, codec: Codec[Value]):
        self.store, self.codec = store, codec
        self.path = store.path
        self.rejected = 0  # entries read and not trusted since this cache was opened

    def get(self, key: str) -> Value | None:
        blob = self.store.get(key)
        return None if blob is None else self._open(key, blob)

    def get_many(self, keys: Iterable[str]) -> dict[str, Value]:
        """{key: value} for the keys stored with a valid entry."""
        opened = {key: self._open(key, blob) for key, blob in self.store.get_many(keys).items()}
        return {key: value for key, value in opened.items() if value is not None}

    def put(self, key: str, value: Value) -> None:
        self.store.put(key, seal(key, self.codec.encode(value)))

    def put_many(self, items: Mapping[str, Value]) -> None:
        self.store.put_many({key: seal(key, self.codec.encode(value)) for key, value in items.items()})

    def drop_table(self, old_table: str) -> None:
        self.store.drop_table(old_table)

    def __len__(self) -> int:
        return len(self.store)

    def close(self) -> None:
        self.store.close()

    def _open(self, key: str, blob: bytes) -> Value | None:
        try:
            return self.codec.decode(unseal(key, blob))
        except (ValueError, RecursionError) as problem:  # RecursionError: JSON nested too deep to parse
            self._reject(key, problem)
            return None

    def _reject(self, key: str, problem: BaseException) -> None:
        self.rejected += 1
        if self.rejected > 1:  # once per cache: a damaged store must not flood the run's log
            return
        log.warning(
            "cache %s, table %s, namespace %s: the entry for %s is not trusted (%s); it is computed again "
            "and overwritten, and later such entries of this cache are repaired without a warning",
            self.path or "in memory",
            self.store.table,
            self.store.namespace,
            key,
            problem,
        )


def namespace_of(tenant: str | None) -> str:
    """`tenant:<tenant>`, or the shared namespace for None."""
    return SHARED_NAMESPACE if tenant is None else f"tenant:{validate_name('tenant', tenant)}"


def open_cache(
    location: str | Path | None, table: str, codec: Codec[Value], *, tenant: str | None
) -> CheckedCache[Value]:
    """The cache of `tenant` (None: the shared namespace) in the store `location` names, its entries
    sealed on write and checked on read."""
    return CheckedCache(open_store(location, table, namespace_of(tenant)), codec)


def open_store(location: str | Path | None, table: str, namespace: str) -> CacheStore:
    """A RedisCache for a redis:// or rediss:// URL, a SqliteCache for a file path, and an in-memory
    SqliteCache for None or ''."""
    if not location:
        return SqliteCache(None, table, namespace)
    if isinstance(location, str) and is_url(location):
        scheme = location.partition("://")[0].lower()
        if scheme not in REDIS_SCHEMES:
            raise ValueError(
                f"cache location {redacted(location)}: a URL must be redis:// or rediss://, else give a file path"
            )
        return RedisCache(location, table, namespace)
    return SqliteCache(location, table, namespace)


def is_url(location: str) -> bool:
    # Any scheme counts, so that a mistyped URL is refused rather than made into a file of that name.
    scheme, separator, _ = location.partition("://")
    return bool(separator) and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()


def seal(key: str, payload: bytes) -> bytes:
    """The entry stored for `key`: a mark, the key it was computed for, a checksum, then the payload."""
    source = key.encode("utf-8")
    return (
        _SEAL_MARK + len(source).to_bytes(_SOURCE_LENGTH_BYTES, "big") + source + _checksum(source, payload) + payload
    )


def unseal(key: str, blob: bytes) -> bytes:
    """The payload of an entry sealed for `key`; DamagedEntry if it is unsealed, for another key, or damaged."""
    if not blob.startswith(_SEAL_MARK):
        raise DamagedEntry("not a sealed entry")
    source_start = len(_SEAL_MARK) + _SOURCE_LENGTH_BYTES
    source_end = source_start + int.from_bytes(blob[len(_SEAL_MARK) : source_start], "big")
    if len(blob) < source_end + _CHECKSUM_BYTES:
        raise DamagedEntry("truncated")
    source = blob[source_start:source_end]
    if source != key.encode("utf-8"):
        raise DamagedEntry(f"computed for another key, {source[:100].decode('utf-8', 'replace')!r}")
    checksum, payload = blob[source_end : source_end + _CHECKSUM_BYTES], blob[source_end + _CHECKSUM_BYTES :]
    if checksum != _checksum(source, payload):
        raise DamagedEntry("checksum mismatch")
    return payload


def _checksum(source: bytes, payload: bytes) -> bytes:
    digest = hashlib.blake2b(digest_size=_CHECKSUM_BYTES)
    digest.update(len(source).to_bytes(_SOURCE_LENGTH_BYTES, "big") + source)
    digest.update(payload)
    return digest.digest()
