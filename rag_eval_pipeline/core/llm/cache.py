"""A content-addressed, on-disk cache of judge calls.

The key is the sha256 of the whole request (model, messages, schema, sampling parameters), so a
re-run or a resumed run makes no repeated call and gets the same answer, and any change to the
prompt or the model is a new key rather than a stale hit. The reply and its token counts are stored
as one JSON blob in the shared SQLite store (core.sqlite_cache).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rag_eval_pipeline.stores.cache import open_cache

# Files written before the shared store kept one column per field in a table `calls`.
_EARLIER_LAYOUT = (
    "calls",
    "SELECT key, CAST(json_object('content', content, 'prompt_tokens', prompt_tokens, "
    "'completion_tokens', completion_tokens) AS BLOB) FROM calls",
)


def request_key(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class LLMCallCache:
    def __init__(self, path: Path | str | None = None):
        self._store = open_cache(path, "judge_calls")
        self._store.adopt(*_EARLIER_LAYOUT)
        self.path = self._store.path  # "" when in memory: nothing survives the process

    def get(self, key: str) -> tuple[str, int, int] | None:
        blob = self._store.get(key)
        if blob is None:
            return None
        reply = json.loads(blob)
        return reply["content"], reply["prompt_tokens"], reply["completion_tokens"]

    def put(self, key: str, content: str, prompt_tokens: int, completion_tokens: int) -> None:
        reply = {"content": content, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        self._store.put(key, json.dumps(reply, ensure_ascii=False).encode("utf-8"))

    def __len__(self) -> int:
        return len(self._store)
