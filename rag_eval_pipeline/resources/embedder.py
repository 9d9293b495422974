"""The embedding model as a resource; one model per process, and one cache per location and tenant.

A run's caches (this one and the judge's) hold the entries of the run's tenant only: the tenant of its
partition, which the CLI, the sensors and the gate service set from a validated name or a verified token.
Nothing else names it: no resource config, no run config. Sharing the caches across tenants is the
operator's choice alone (RAG_EVAL_CACHE_SHARED_ACROSS_TENANTS, read where the run executes).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from dagster import ConfigurableResource, DagsterRun, InitResourceContext
from pydantic import PrivateAttr

from rag_eval_pipeline.core.embeddings import PRECISION, Embedder

PARTITION_TAG = "dagster/partition"  # Dagster's tag of a run's partition key, the one its assets read
TENANT_TAG = "dagster/partition/tenant"  # the tenant dimension of that key, as Dagster tags it too


class CacheTenantError(ValueError):
    """A run that may not use the caches: it targets no single tenant and the caches are per tenant."""


@dataclass(frozen=True)
class CacheTenant:
    """Whose namespace a run's caches use: `name`, or the shared one (None); or why the run may use none."""

    name: str | None = None
    refusal: str = ""

    def require(self) -> str | None:
        if self.refusal:
            raise CacheTenantError(self.refusal)
        return self.name


OUTSIDE_RUNS = CacheTenant()  # tools and resources built outside a run: no tenant, the shared namespace


def cache_tenant(context: InitResourceContext) -> CacheTenant:
    """The cache tenant of the run the resource is set up for."""
    if context.run is None:
        return OUTSIDE_RUNS
    from rag_eval_pipeline import settings  # read where the run executes, as the operator set it there

    return run_cache_tenant(context.run, settings.load().production.cache_shared_across_tenants)


def run_cache_tenant(run: DagsterRun, shared_across_tenants: bool) -> CacheTenant:
    """The tenant of the run's partition key; the shared namespace only when the operator chose it."""
    if shared_across_tenants:
        return CacheTenant(None)
    from rag_eval_pipeline.partitions import split_key

    key = run.tags.get(PARTITION_TAG, "")
    refusal = (
        f"run {run.run_id} may not use the caches: they are kept per tenant "
        f"(RAG_EVAL_CACHE_SHARED_ACROSS_TENANTS is off), and the run"
    )
    if not key:
        return CacheTenant(refusal=f"{refusal} targets no single (tenant, dataset version) partition")
    try:
        tenant, _ = split_key(key)
    except Exception:  # Dagster's own check of the key's shape raises its CheckError, a bare Exception
        return CacheTenant(refusal=f"{refusal}'s partition {key!r} is no (tenant, dataset version) key")
    if run.tags.get(TENANT_TAG, tenant) != tenant:
        return CacheTenant(refusal=f"{refusal}'s partition {key!r} disagrees with its tenant tag")
    return CacheTenant(tenant)


@lru_cache(maxsize=16)
def _embedder(cache_path: str, tenant: str | None, precision: str) -> Embedder:
    return Embedder(cache_path or None, tenant=tenant, precision=precision)


class EmbedderResource(ConfigurableResource):
    cache_path: str = ""  # empty: in-memory cache only

    _cache_tenant: CacheTenant = PrivateAttr(default=OUTSIDE_RUNS)
    _precision: str = PrivateAttr(default=PRECISION)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        from rag_eval_pipeline import settings  # the operator's choice where the run executes

        self._cache_tenant = cache_tenant(context)
        self._precision = settings.load().embedding_precision

    def get(self) -> Embedder:
        """The model with the cache of the run's tenant."""
        return _embedder(self.cache_path, self._cache_tenant.require(), self._precision)
