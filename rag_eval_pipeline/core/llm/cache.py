"""A content-addressed, on-disk cache of judge calls.

The key is the sha256 of the whole request (model, messages, schema, sampling parameters), so a
re-run or a resumed run makes no repeated call and gets the same answer, and any change to the
prompt or the model is a new key rather than a stale hit. The reply and its token counts are stored
as one JSON blob (stores.cache: a SQLite file, or Redis in production), in the namespace of the run's
tenant and sealed with its key: a reply stored for another request, or that is no valid JSON, is a
miss, asked again and overwritten.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rag_eval_pipeline.stores.cache import open_cache

# Files written before the shared store kept unsealed replies in a table `calls`: dropped, not trusted.
_EARLIER_TABLE = "calls"

Reply = tuple[str, int, int]  # content (the reply's JSON), prompt tokens, completion tokens


def request_key(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class ReplyCodec:
    """A reply as {"content", "prompt_tokens", "completion_tokens"} in JSON; its content must be JSON too."""

    def encode(self, value: Reply) -> bytes:
        content, prompt_tokens, completion_tokens = value
        reply = {"content": content, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        return json.dumps(reply, ensure_ascii=False).encode("utf-8")

    def decode(self, payload: bytes) -> Reply:
        reply = json.loads(payload)
        if not isinstance(reply, dict) or not isinstance(reply.get("content"), str):
            raise ValueError("no reply content")
        tokens = reply.get("prompt_tokens"), reply.get("completion_tokens")
        if not all(type(count) is int and count >= 0 for count in tokens):  # type(): a bool is no count
            raise ValueError("no token counts")
        json.loads(reply["content"])  # the client parses it as the reply: it must be JSON
        return reply["content"], reply["prompt_tokens"], reply["completion_tokens"]


class LLMCallCache:
    """`tenant`'s judge calls; None: the shared namespace, for tools outside any tenant's run."""

    def __init__(self, path: Path | str | None = None, tenant: str | None = None):
        self._cache = open_cache(path, "judge_calls", ReplyCodec(), tenant=tenant)
        self._cache.drop_table(_EARLIER_TABLE)
        self.path = self._cache.path  # "" when in memory: nothing survives the process

    def get(self, key: str) -> Reply | None:
        return self._cache.get(key)

    def put(self, key: str, content: str, prompt_tokens: int, completion_tokens: int) -> None:
        self._cache.put(key, (content, prompt_tokens, completion_tokens))

    def __len__(self) -> int:
        return len(self._cache)
