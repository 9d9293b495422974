"""deploy/celery's configs: the worker reaches the Redis broker, and both files agree with queues.py."""

import pytest
import yaml

from rag_eval_pipeline.automation import queues
from rag_eval_pipeline_tests.support.celery_workers import DEPLOY, worker_app_settings

BROKER, BACKEND = "redis://127.0.0.1:6379/5", "redis://127.0.0.1:6379/6"
URLS = {"RAG_EVAL_CELERY_BROKER_URL": BROKER, "RAG_EVAL_CELERY_BACKEND_URL": BACKEND}


def _load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))


@pytest.mark.dagster
def test_the_worker_config_reaches_the_redis_broker(tmp_path):
    """Read as `dagster-celery worker start -y` reads it: a `broker:` anywhere but under `execution: config:`
    leaves the worker on amqp://localhost:5672 and fails here."""
    assert worker_app_settings(DEPLOY / "worker.yaml", tmp_path, URLS) == {"broker": BROKER, "backend": BACKEND}


@pytest.mark.dagster
def test_a_misplaced_broker_key_falls_back_to_amqp(tmp_path):
    """Why the test above matters: the worker raises nothing, it just talks to another broker."""
    misplaced = tmp_path / "worker.yaml"
    misplaced.write_text(yaml.safe_dump({"broker": BROKER, "execution": {"config": {"backend": BACKEND}}}))
    assert worker_app_settings(misplaced, tmp_path, {})["broker"].startswith("pyamqp://guest@localhost:5672")


def test_the_instance_and_the_workers_read_the_same_broker_variables():
    launcher = _load("dagster.yaml")["run_launcher"]["config"]
    worker = _load("worker.yaml")["execution"]["config"]
    for key, variable in (("broker", "RAG_EVAL_CELERY_BROKER_URL"), ("backend", "RAG_EVAL_CELERY_BACKEND_URL")):
        assert launcher[key] == worker[key] == {"env": variable}


def test_the_instance_limits_use_the_tags_queues_sets():
    config = _load("dagster.yaml")
    assert config["run_launcher"]["config"]["default_queue"] in queues.QUEUES.values()
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    per_tenant = {"key": "dagster/partition/tenant", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    assert per_tenant in limits
    large_tier = next(limit for limit in limits if limit["key"] == queues.TIER_TAG)
    assert large_tier["value"] == "large"
    # One run slot is always left for the small tier.
    assert large_tier["limit"] < config["concurrency"]["runs"]["max_concurrent_runs"]


@pytest.mark.dagster
def test_queue_tag_is_the_one_the_launcher_reads():
    from dagster._core.storage.tags import PRIORITY_TAG
    from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

    assert queues.QUEUE_TAG == DAGSTER_CELERY_QUEUE_TAG
    assert queues.PRIORITY_TAG == PRIORITY_TAG
