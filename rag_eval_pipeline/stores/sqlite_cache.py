"""A small content-addressed store: key (a content hash) -> blob, in one SQLite table.

Shared by the embedding cache and the LLM call cache. One connection per store, guarded by a lock, so
threads may share it. On disk the file is in WAL mode and every write takes the write lock up front
(BEGIN IMMEDIATE) and waits for it up to BUSY_TIMEOUT_S, so several processes (Dagster runs, the CLI)
may read and write one cache file at once: readers never block, writers queue instead of failing
with "database is locked". A value is a pure function of its key, so when two writers race on a key
either value is right.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 60.0
_MAX_PARAMETERS = 500  # below SQLite's cap on bound parameters per statement
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class SqliteCache:
    """`path=None` keeps the store in memory: nothing survives the process."""

    def __init__(self, path: Path | str | None, table: str):
        if not _TABLE_NAME.fullmatch(table):
            raise ValueError(f"invalid table name {table!r}")
        self.path = str(path) if path else ""
        self.table = table
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; writes open their own, IMMEDIATE.
        self._db = sqlite3.connect(
            self.path or ":memory:", timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()
        with self._lock:
            if self.path:
                self._db.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
                self._db.execute("PRAGMA synchronous=NORMAL")  # safe with WAL; a cache may lose its last write
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def get(self, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """{key: value} for the keys that are stored."""
        ordered = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(ordered), _MAX_PARAMETERS):
                batch = ordered[start : start + _MAX_PARAMETERS]
                rows = self._db.execute(
                    f"SELECT key, value FROM {self.table} WHERE key IN ({','.join('?' * len(batch))})", batch
                )
                found.update(rows)
        return found

    def put(self, key: str, value: bytes) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """All in one transaction: a killed process keeps every batch it finished, and no part of one."""
        with self._writing() as db:
            db.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?)", items.items())

    def adopt(self, old_table: str, select: str) -> None:
        """Move the rows of an earlier layout's `old_table` into this store once, then drop it, so the
        cache files written before this store existed keep their entries. `select` yields (key, value)."""
        with self._writing() as db:  # one process adopts the rows; the others then find no old table
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (old_table,)).fetchone():
                db.execute(f"INSERT OR IGNORE INTO {self.table} (key, value) {select}")
                db.execute(f"DROP TABLE {old_table}")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

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
