"""A small content-addressed store: key (a content hash) -> blob, in one SQLite table, by namespace.

Shared by the embedding cache and the LLM call cache. Every row carries its namespace (`tenant:<name>`,
or `shared`; see stores.cache), so one file holds every tenant's entries and a store reads, writes and
counts only its own. One connection per store, guarded by a lock, so threads may share it. On disk the
file is in WAL mode and every write takes the write lock up front (BEGIN IMMEDIATE) and waits for it up
to BUSY_TIMEOUT_S, so several processes (Dagster runs, the CLI) may read and write one cache file at
once: readers never block, writers queue instead of failing with "database is locked". A value is a
pure function of its key, so when two writers race on a key either value is right.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 60.0
_MAX_PARAMETERS = 500  # below SQLite's cap on bound parameters per statement
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*")
# `shared`, or `tenant:` and a tenant name (core.names): no glob character, and no namespace is a
# prefix of another's keys, so the Redis store may build key prefixes and SCAN patterns from it.
_NAMESPACE = re.compile(r"shared|tenant:[a-z0-9_-]{1,63}")


def check_table(table: str) -> str:
    """The rule for table names in every store, so that a name works in both."""
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"invalid table name {table!r}")
    return table


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"invalid cache namespace {namespace!r}: 'shared' or 'tenant:<tenant>'")
    return namespace


class SqliteCache:
    """`path=None` keeps the store in memory: nothing survives the process."""

    def __init__(self, path: Path | str | None, table: str, namespace: str):
        self.table, self.namespace = check_table(table), check_namespace(namespace)
        self.path = str(path) if path else ""
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; writes open their own, IMMEDIATE.
        self._db = sqlite3.connect(
            self.path or ":memory:", timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()
        if self.path:
            with self._lock:
                self._use_wal()
                self._db.execute("PRAGMA synchronous=NORMAL")  # safe with WAL; a cache may lose its last write
        self._create_table()

    def _use_wal(self) -> None:
        """Switch the file to WAL (persistent: once per file). The switch may answer 'database is locked' at
        once, without the busy timeout, while another process creates the same file: wait for it then."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT value FROM {self.table} WHERE namespace = ? AND key = ?", (self.namespace, key)
            ).fetchone()
        return row[0] if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """{key: value} for the keys that are stored."""
        ordered = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(ordered), _MAX_PARAMETERS):
                batch = ordered[start : start + _MAX_PARAMETERS]
                rows = self._db.execute(
                    f"SELECT key, value FROM {self.table} "
                    f"WHERE namespace = ? AND key IN ({','.join('?' * len(batch))})",
                    [self.namespace, *batch],
                )
                found.update(rows)
        return found

    def put(self, key: str, value: bytes) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """All in one transaction: a killed process keeps every batch it finished, and no part of one."""
        with self._writing() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO {self.table} (namespace, key, value) VALUES (?, ?, ?)",
                ((self.namespace, key, value) for key, value in items.items()),
            )

    def drop_table(self, old_table: str) -> None:
        """Drop an earlier layout's table, if the file has one: its rows name no tenant and no input they
        were computed from, so none can be trusted or given to a tenant."""
        with self._writing() as db:
            db.execute(f"DROP TABLE IF EXISTS {check_table(old_table)}")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute(
                f"SELECT count(*) FROM {self.table} WHERE namespace = ?", (self.namespace,)
            ).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _create_table(self) -> None:
        with self._writing() as db:  # one process replaces an old table; the others then find the new one
            columns = {row[1] for row in db.execute(f"PRAGMA table_info({self.table})")}
            if columns and "namespace" not in columns:
                # The layout before namespaces (key, value): entries of no known tenant, unsealed.
                db.execute(f"DROP TABLE {self.table}")
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (namespace TEXT NOT NULL, key TEXT NOT NULL, "
                "value BLOB NOT NULL, PRIMARY KEY (namespace, key))"
            )

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A transaction that holds the file's write lock from its start: it waits for other writers
        (up to BUSY_TIMEOUT_S) rather than fail half way when upgrading a read lock."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
