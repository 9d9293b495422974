"""What runs the lineage without a person: the jobs, the sensors (new documents, new candidate commits,
dead runs), the nightly re-synthesis schedule, the one builder of run config, the per-tenant Celery
queues, and run liveness (heartbeats; runs whose process is gone marked failed). `inbox`, `queues` and
`liveness` know nothing of Dagster."""
