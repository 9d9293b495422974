"""The key -> blob store of stores.sqlite_cache, kept in Redis so that every worker shares one cache.

Keys live under `rag_eval:<table>:<namespace>:<key>` (the namespace: `tenant:<name>` or `shared`, see
stores.cache), so the caches, the tenants and any other user of the same Redis never clash. A value is a
pure function of its key, so racing writers are harmless, as with the SQLite file. A Redis that cannot
be reached is a `CacheUnavailable` naming the URL (never a judge or model error), raised within the
bounded socket timeouts below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from rag_eval_pipeline.stores.sqlite_cache import check_namespace, check_table

KEY_PREFIX = "rag_eval"  # before every key: the caches never clash with another user of the Redis
CONNECT_TIMEOUT_S = 2.0
# A batch of embeddings is a few hundred kB, so a healthy Redis answers well within this.
SOCKET_TIMEOUT_S = 10.0
RETRIES = 2  # a dropped connection is retried twice, 50 ms and 100 ms apart; then the cache is unavailable
_BATCH = 1000  # keys per MGET/MSET: one huge command would hold up every other client of the server


class CacheUnavailable(OSError):
    """The shared cache cannot be reached; the message names its URL (without the password)."""


class RedisCache:
    def __init__(self, url: str, table: str, namespace: str):
        self.table, self.namespace = check_table(table), check_namespace(namespace)
        self.url = url
        self.path = redacted(url)  # what messages may show
        self._prefix = f"{KEY_PREFIX}:{table}:{namespace}:"
        try:
            import redis  # imported here: the embedded SQLite mode does not need the package
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError:
            raise ValueError(f"the cache at {self.path} needs the `redis` package: pip install redis") from None
        self._errors = redis.RedisError  # also a refused login or a full server: a cache fault either way
        try:
            self._client = redis.Redis.from_url(
                url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=SOCKET_TIMEOUT_S,
                retry=Retry(ExponentialBackoff(cap=0.1, base=0.05), RETRIES),
            )
        except ValueError as error:
            raise ValueError(f"invalid cache URL {self.path}: {_one_line(error)}") from None
        with self._reaching():  # a wrong URL or a down server fails here, before any work is done
            self._client.ping()

    def get(self, key: str) -> bytes | None:
        with self._reaching():
            value = self._client.get(self._prefix + key)
        return value if value is None or isinstance(value, bytes) else str(value).encode()  # the client returns bytes

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """{key: value} for the keys that are stored; one round trip."""
        ordered = list(dict.fromkeys(keys))
        if not ordered:
            return {}
        batches = [ordered[start : start + _BATCH] for start in range(0, len(ordered), _BATCH)]
        with self._reaching():
            pipe = self._client.pipeline(transaction=False)
            for batch in batches:
                pipe.mget([self._prefix + key for key in batch])
            replies = pipe.execute()
        return {
            key: value
            for batch, values in zip(batches, replies)
            for key, value in zip(batch, values)
            if value is not None
        }

    def put(self, key: str, value: bytes) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """One round trip in MULTI/EXEC: other clients see all of the batch or none of it."""
        pairs = [(self._prefix + key, value) for key, value in items.items()]
        if not pairs:
            return
        with self._reaching():
            pipe = self._client.pipeline(transaction=True)
            for start in range(0, len(pairs), _BATCH):
                pipe.mset(dict(pairs[start : start + _BATCH]))
            pipe.execute()

    def drop_table(self, old_table: str) -> None:
        """Nothing to drop: earlier layouts' tables existed only in SQLite files. (Keys written before the
        namespaces, `rag_eval:<table>:<key>`, are never read again; Redis's LRU policy evicts them.)"""

    def __len__(self) -> int:
        """Keys in this cache's table and namespace; SCAN walks the whole keyspace, so this is for tests and tools."""
        with self._reaching():
            return sum(1 for _ in self._client.scan_iter(match=self._prefix + "*", count=1000))

    def close(self) -> None:
        self._client.close()

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        try:
            yield
        except self._errors as error:
            raise CacheUnavailable(f"the cache at {self.path} is unavailable: {_one_line(error)}") from error


def redacted(url: str) -> str:
    """The URL with its password replaced by ***, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
