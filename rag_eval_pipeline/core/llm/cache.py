"""A content-addressed, on-disk cache of judge calls.

The key is the sha256 of the whole request (model, messages, schema, sampling parameters), so a
re-run or a resumed run makes no repeated call and gets the same answer, and any change to the
prompt or the model is a new key rather than a stale hit.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path


def request_key(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, path: Path | str | None = None):
        self.path = str(path) if path else ""  # "" when in memory: nothing survives the process
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, content TEXT, prompt_tokens INT, completion_tokens INT)"
        )
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[str, int, int] | None:
        with self._lock:
            return self._db.execute(
                "SELECT content, prompt_tokens, completion_tokens FROM calls WHERE key = ?", (key,)
            ).fetchone()

    def put(self, key: str, content: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?)", (key, content, prompt_tokens, completion_tokens))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM calls").fetchone()[0]
