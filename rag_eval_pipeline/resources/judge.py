"""The judge as a resource: the embedded offline judge by default, or an LLM over an OpenAI-compatible server.

Production points it at vLLM (`response_format="json_schema"`); the llama.cpp server needs
`json_object_schema`. `judge_from_env()` reads the RAG_EVAL_JUDGE_* variables (see the README).
"""

from __future__ import annotations

import os

from dagster import ConfigurableResource
from pydantic import Field

from rag_eval_pipeline.core.judging.judge import Judge, OfflineJudge
from rag_eval_pipeline.core.llm.client import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, LLMSettings
from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
from rag_eval_pipeline.resources.embedder import EmbedderResource


class JudgeResource(ConfigurableResource):
    embedder: EmbedderResource
    kind: str = Field(default="offline", description="'offline' (embedded, no server) or 'llm'.")
    base_url: str = Field(default="", description="OpenAI-compatible endpoint, e.g. http://vllm:8000/v1")
    model: str = ""
    api_key: str = "not-needed"
    mode: str = Field(default="decomposed", description="'decomposed' (2 calls per item for the core metrics) or 'fused' (1 call).")
    response_format: str = Field(default="json_schema", description="'json_schema' (vLLM, OpenAI) or 'json_object_schema' (llama.cpp).")
    seed: int = 7
    max_tokens: int = 768
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, description="Seconds one attempt of a call may take.")
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        description="Retries of a call on HTTP 408, 409, 429, 5xx, a connection error or a timeout (jittered backoff, Retry-After honoured).",
    )
    concurrency: int = 4
    cache_path: str = Field(default="", description="On-disk cache of judge calls; empty keeps it in memory.")

    def get(self) -> Judge:
        if self.kind == "offline":
            return OfflineJudge(self.embedder.get())
        if self.kind != "llm":
            raise ValueError(f"judge kind must be 'offline' or 'llm', got {self.kind!r}")
        return build_llm_judge(self.llm_settings(), self.mode, self.cache_path)

    def llm_settings(self) -> LLMSettings:
        """The server settings, shared by the LLM judge and the LLM question generator."""
        if not self.base_url or not self.model:
            raise ValueError(
                "an LLM judge or generator needs a server: set RAG_EVAL_JUDGE_BASE_URL and RAG_EVAL_JUDGE_MODEL "
                "(or the judge resource's base_url and model)"
            )
        return LLMSettings(
            base_url=self.base_url, model=self.model, api_key=self.api_key, seed=self.seed,
            max_tokens=self.max_tokens, timeout_s=self.timeout_s, response_format=self.response_format,
            concurrency=self.concurrency, max_retries=self.max_retries,
        )


def judge_from_env(embedder: EmbedderResource, default_cache_path: str) -> JudgeResource:
    env = os.environ.get
    return JudgeResource(
        embedder=embedder,
        kind=env("RAG_EVAL_JUDGE", "offline"),
        base_url=env("RAG_EVAL_JUDGE_BASE_URL", ""),
        model=env("RAG_EVAL_JUDGE_MODEL", ""),
        api_key=env("RAG_EVAL_JUDGE_API_KEY", "not-needed"),
        mode=env("RAG_EVAL_JUDGE_MODE", "decomposed"),
        response_format=env("RAG_EVAL_JUDGE_RESPONSE_FORMAT", "json_schema"),
        concurrency=_number("RAG_EVAL_JUDGE_CONCURRENCY", int, 4),
        timeout_s=_number("RAG_EVAL_JUDGE_TIMEOUT_S", float, DEFAULT_TIMEOUT_S),
        max_retries=_number("RAG_EVAL_JUDGE_MAX_RETRIES", int, DEFAULT_MAX_RETRIES),
        cache_path=env("RAG_EVAL_JUDGE_CACHE", default_cache_path),
    )


def _number(variable: str, kind: type, default):
    """A numeric variable; a typo names the variable rather than failing deep in the run."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{variable} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
