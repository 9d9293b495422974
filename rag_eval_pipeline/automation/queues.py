"""Which Celery queue a tenant's runs go to, and the run tags that send them there.

Tenants come in two tiers. The large ones are named in RAG_EVAL_LARGE_TENANTS (comma-separated,
e.g. `acme,globex`); every other tenant is small. Each tier has its own Celery queue, so a backlog of
large-tenant runs waits in its own queue and a worker that serves the small queue (see
deploy/celery/worker.yaml) takes a small tenant's run at once. The Dagster instance
(deploy/celery/dagster.yaml) keeps the other half of the promise: at most one run per tenant, and
a run slot the large tier can never take.

No Dagster import here: the tag names are the ones dagster-celery and Dagster read, spelled out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from rag_eval_pipeline.core.names import RESULTS_IN_DATABASE, RESULTS_TAG, PartitionNameError, validate_name
from rag_eval_pipeline.settings import SettingsError

Tier = Literal["small", "large"]

LARGE_TENANTS_VARIABLE = "RAG_EVAL_LARGE_TENANTS"
QUEUES: dict[Tier, str] = {"small": "rag-eval-small", "large": "rag-eval-large"}

QUEUE_TAG = "dagster-celery/queue"  # CeleryRunLauncher sends the run to this queue
TIER_TAG = "rag_eval/tier"  # the instance's tag_concurrency_limits cap the large tier on it
PRIORITY_TAG = "dagster/priority"  # the run queue takes higher values first
DATABASE_URL_VARIABLE = "RAG_EVAL_DATABASE_URL"
# A small tenant's queued run goes ahead of large ones when a run slot frees up.
PRIORITIES: dict[Tier, int] = {"small": 1, "large": 0}
# Run config for every run launched onto Celery: a worker's pool processes are daemonic and may not start
# the child processes of Dagster's default multiprocess executor, so the steps run in the run's process.
IN_PROCESS_RUN_CONFIG = {"execution": {"config": {"in_process": {}}}}


def large_tenants(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The tenants RAG_EVAL_LARGE_TENANTS names (empty or unset: none)."""
    environ = os.environ if environ is None else environ
    names = [name.strip() for name in environ.get(LARGE_TENANTS_VARIABLE, "").split(",") if name.strip()]
    try:
        return frozenset(validate_name("tenant", name) for name in names)
    except PartitionNameError as error:
        raise SettingsError(f"{LARGE_TENANTS_VARIABLE}: {error}") from None


def tier_of(tenant: str, environ: Mapping[str, str] | None = None) -> Tier:
    return "large" if validate_name("tenant", tenant) in large_tenants(environ) else "small"


def queue_for(tenant: str, environ: Mapping[str, str] | None = None) -> str:
    return QUEUES[tier_of(tenant, environ)]


def run_tags(tenant: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags to add to every run of tenant: its Celery queue, its tier and its queue priority, and, in
    production mode, that its results belong in the results database (a worker set up without it refuses
    the run rather than keep its results on its own disk)."""
    environ = os.environ if environ is None else environ
    tier = tier_of(tenant, environ)
    tags = {QUEUE_TAG: QUEUES[tier], TIER_TAG: tier, PRIORITY_TAG: str(PRIORITIES[tier])}
    if environ.get(DATABASE_URL_VARIABLE, "").strip():
        tags[RESULTS_TAG] = RESULTS_IN_DATABASE
    return tags
