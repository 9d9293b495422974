"""The judge as a resource: the embedded offline judge by default, or an LLM over an OpenAI-compatible server.

Production points it at vLLM (`response_format="json_schema"`); the llama.cpp server needs
`json_object_schema`. `JudgeResource.from_settings` builds it from the RAG_EVAL_JUDGE_* settings
(see the README). Its fields are typed, so Dagster refuses a bad kind, mode or format at launch. Its
call cache holds the run's tenant's entries only, as the embedder's (resources/embedder.py). Within a
run, every request carries the tenant's `cache_salt` (vLLM never shares prefix-cache blocks between
tenants) and the priority of the tenant's tier when one is set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import get_args

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from pydantic import Field, PrivateAttr, field_validator

from rag_eval_pipeline.core.defaults import JudgeKind, JudgeMode, ResponseFormat, Tier
from rag_eval_pipeline.core.judging.judge import Judge, OfflineJudge
from rag_eval_pipeline.core.judging.llm_judge import LLMJudge
from rag_eval_pipeline.core.llm.cache import LLMCallCache
from rag_eval_pipeline.core.llm.client import LLMSettings, StructuredLLM
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.resources.embedder import (
    OUTSIDE_RUNS,
    CacheTenant,
    EmbedderResource,
    cache_tenant,
    run_cache_tenant,
)
from rag_eval_pipeline.settings import JUDGE_VARIABLES, JudgeSettings

_DEFAULT = JudgeSettings()  # the defaults live in the settings, and only there
# Free-text options the environment sets are handed to Dagster by name: it reads them at launch and
# its UI shows the variable, never the value (the API key is a secret).
_FROM_ENVIRONMENT = {"base_url": "base_url", "model": "model", "api_key": "api_key", "cache_path": "cache"}


class JudgeResource(ConfigurableResource):
    embedder: EmbedderResource
    kind: JudgeKind = Field(default=_DEFAULT.kind, description="'offline' (embedded, no server) or 'llm'.")
    base_url: str = Field(default=_DEFAULT.base_url, description="OpenAI-compatible endpoint, e.g. http://vllm:8000/v1")
    model: str = _DEFAULT.model
    api_key: str = _DEFAULT.api_key
    mode: JudgeMode = Field(
        default=_DEFAULT.mode, description="'decomposed' (2 calls per item for the core metrics) or 'fused' (1 call)."
    )
    response_format: ResponseFormat = Field(
        default=_DEFAULT.response_format,
        description="'json_schema' (vLLM, OpenAI) or 'json_object_schema' (llama.cpp).",
    )
    seed: int = LLMSettings.seed
    max_tokens: int = Field(default=LLMSettings.max_tokens, ge=1)
    timeout_s: float = Field(
        default=_DEFAULT.timeout_s, gt=0, allow_inf_nan=False, description="Seconds one attempt of a call may take."
    )
    max_retries: int = Field(
        default=_DEFAULT.max_retries,
        ge=0,
        description="Retries of a call on HTTP 408, 409, 5xx but 503, a connection error or a timeout (jittered backoff, Retry-After honoured).",
    )
    rate_limit_budget_s: float = Field(
        default=_DEFAULT.rate_limit_budget_s,
        ge=0,
        allow_inf_nan=False,
        description="Seconds one call may spend retrying HTTP 429 and 503, waiting what Retry-After asks.",
    )
    priority: int | None = Field(
        default=_DEFAULT.priority, description="vLLM's request priority (lower first); None: not sent."
    )
    priority_by_tier: dict[str, int] = Field(
        default_factory=dict,
        description="vLLM's request priority by the run's tenant tier (small, large); others get priority.",
    )
    concurrency: int = Field(default=_DEFAULT.concurrency, ge=1)
    cache_path: str = Field(
        default=_DEFAULT.cache, description="On-disk cache of judge calls; empty keeps it in memory."
    )

    @field_validator("priority_by_tier")
    @classmethod
    def _known_tiers(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(get_args(Tier)))  # a Map of Literal keys is no Dagster config type
        if unknown:
            raise ValueError(f"priority_by_tier names tiers {unknown}; known: {', '.join(get_args(Tier))}")
        return value

    _cache_tenant: CacheTenant = PrivateAttr(default=OUTSIDE_RUNS)
    _tenant: str | None = PrivateAttr(default=None)  # the run's tenant, shared caches or not
    _tier: Tier | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._cache_tenant = cache_tenant(context)
        if context.run is not None:
            from rag_eval_pipeline.automation.queues import tier_of

            self._tenant = run_cache_tenant(context.run, shared_across_tenants=False).name
            self._tier = tier_of(self._tenant) if self._tenant else None

    @classmethod
    def from_settings(
        cls,
        judge: JudgeSettings,
        embedder: EmbedderResource,
        cache_path: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> JudgeResource:
        """The resource the settings describe; its call cache at cache_path unless RAG_EVAL_JUDGE_CACHE says.

        Typed options (kind, mode, format, numbers) come from the settings, which checked them. A
        free-text option that its variable sets in environ (default: the process environment, which
        the settings were loaded from) goes in as that EnvVar.
        """
        environ = os.environ if environ is None else environ
        if cache_path is not None:
            judge = judge.model_copy(update={"cache": cache_path})
        text = {
            field: EnvVar(JUDGE_VARIABLES[name])
            if environ.get(JUDGE_VARIABLES[name], "").strip()
            else getattr(judge, name)
            for field, name in _FROM_ENVIRONMENT.items()
        }
        return cls(
            embedder=embedder,
            kind=judge.kind,
            mode=judge.mode,
            response_format=judge.response_format,
            timeout_s=judge.timeout_s,
            max_retries=judge.max_retries,
            rate_limit_budget_s=judge.rate_limit_budget_s,
            priority=judge.priority,
            priority_by_tier={str(tier): value for tier, value in judge.priority_by_tier.items()},
            concurrency=judge.concurrency,
            base_url=text["base_url"],
            model=text["model"],
            api_key=text["api_key"],
            cache_path=text["cache_path"],
        )

    def get(self) -> Judge:
        if self.kind == "offline":
            return OfflineJudge(self.embedder.get())
        judge = LLMJudge(StructuredLLM(self.llm_settings(), self.call_cache()), mode=self.mode)
        judge.name += self.embedder.get().judge_suffix  # its relevance and correctness use the embeddings
        return judge

    def call_cache(self) -> LLMCallCache:
        """The judge-call cache of the run's tenant, for the judge and the LLM question generator."""
        return LLMCallCache(self.cache_path or None, tenant=self._cache_tenant.require())

    def llm_settings(self) -> LLMSettings:
        """The server settings, shared by the LLM judge and the LLM question generator."""
        if not self.base_url or not self.model:
            raise ValueError(
                f"an LLM judge or generator needs a server: set {JUDGE_VARIABLES['base_url']} and "
                f"{JUDGE_VARIABLES['model']} (or the judge resource's base_url and model)"
            )
        return LLMSettings(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            seed=self.seed,
            max_tokens=self.max_tokens,
            timeout_s=self.timeout_s,
            response_format=self.response_format,
            concurrency=self.concurrency,
            max_retries=self.max_retries,
            rate_limit_budget_s=self.rate_limit_budget_s,
            cache_salt=tenant_cache_salt(self._tenant) if self._tenant else None,
            priority=self.priority_by_tier.get(self._tier, self.priority) if self._tier else self.priority,
        )


def tenant_cache_salt(tenant: str) -> str:
    """vLLM's prefix-cache salt of a tenant's requests: another tenant's never match it, so no KV block of
    one tenant's prompts serves another's (whose time to first token would tell what was asked)."""
    return sha256(f"rag-eval tenant {tenant}")
