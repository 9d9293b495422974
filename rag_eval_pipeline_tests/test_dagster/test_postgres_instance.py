"""deploy/postgres/dagster.yaml against the real Postgres on this machine, in a database of its own."""

import shutil
import uuid

import psycopg2
import pytest
from dagster import DagsterInstance, materialize

from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.partitions import register_partition

from rag_eval_pipeline.settings import PROJECT_ROOT as REPO

SERVER = dict(host="127.0.0.1", port=5432, user="postgres")


@pytest.fixture
def postgres_url():
    name = f"rag_eval_test_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(dbname="postgres", **SERVER)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}", name
    finally:
        admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_partition_materializes_with_postgres_storage(tmp_path, monkeypatch, postgres_url, resources):
    url, database = postgres_url
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_PG_URL", url)

    instance = DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        key = register_partition(instance, "acme", "v1")
        result = materialize(
            ALL_ASSETS, selection=["raw_documents", "document_chunks"], partition_key=key,
            instance=instance, resources=resources,
        )
        assert result.success
    finally:
        instance.dispose()

    with psycopg2.connect(dbname=database, **SERVER) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT status FROM runs WHERE run_id = %s", (result.run_id,))
        assert cursor.fetchone() == ("SUCCESS",)
        cursor.execute("SELECT partitions_def_name, partition FROM dynamic_partitions ORDER BY 1")
        assert cursor.fetchall() == [("dataset_version", "v1"), ("tenant", "acme")]
        cursor.execute(
            "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND run_id = %s",
            (result.run_id,),
        )
        assert cursor.fetchone() == (2,)
