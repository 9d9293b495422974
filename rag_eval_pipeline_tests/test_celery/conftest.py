"""One Celery deployment for the session: a Postgres database for the Dagster instance, two workers
and the daemon (see support/celery_workers.py). Tests share it; each submits runs of its own tenants.
Runs beat their heartbeat every STALE_AFTER_S / 5 seconds, so a lost worker's run is found in seconds."""

import pytest

from rag_eval_pipeline.automation.queues import QUEUES
from rag_eval_pipeline_tests.support.celery_workers import TIER_ENV, celery_cluster, cluster_instance

# `general` serves both tiers, `small_lane` only small tenants: a large backlog can never hold every worker.
WORKERS = {"general": (QUEUES["large"], QUEUES["small"]), "small_lane": (QUEUES["small"],)}
STALE_AFTER_S = 15.0


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    extra_env = {**TIER_ENV, "RAG_EVAL_RUN_STALE_AFTER_S": f"{STALE_AFTER_S:g}"}
    with celery_cluster(tmp_path_factory.mktemp("celery"), WORKERS, extra_env=extra_env) as running:
        yield running


@pytest.fixture(scope="session")
def cluster_dagster(cluster):
    """The Dagster instance on the cluster's database, for submitting runs and reading their records."""
    with cluster_instance(cluster) as instance:
        yield instance
