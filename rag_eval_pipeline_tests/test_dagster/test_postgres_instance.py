"""deploy/postgres/dagster.yaml against the real Postgres on this machine, in a database of its own."""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg2
import pytest
from dagster import DagsterInstance, materialize

from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.partitions import register_partition

REPO = Path(__file__).resolve().parents[2]

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


@pytest.mark.postgres
@pytest.mark.dagster
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
            ALL_ASSETS,
            selection=["raw_documents", "rejected_documents", "document_chunks"],
            partition_key=key,
            instance=instance,
            resources=resources,
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
        assert cursor.fetchone() == (3,)  # raw_documents, rejected_documents, document_chunks


# --- `rag-eval` on a misconfigured Postgres instance: one line and exit 2 -------------------------

RAG_EVAL = str(Path(sys.executable).parent / "rag-eval")


def _register_with(tmp_path, **variables):
    """`rag-eval register` with the Postgres dagster.yaml in its DAGSTER_HOME; None unsets a variable."""
    home = tmp_path / "pg_home"
    home.mkdir(exist_ok=True)
    shutil.copy(REPO / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse")}
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(
        [RAG_EVAL, "register", "--tenant", "acme", "--version", "v1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line_error(completed) -> str:
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), completed.stderr
    return lines[0]


@pytest.mark.cli
def test_unset_postgres_url_is_one_line_naming_the_variable(tmp_path):
    line = _one_line_error(_register_with(tmp_path, DAGSTER_PG_URL=None))

    assert "DAGSTER_PG_URL" in line and "not set" in line


@pytest.mark.postgres
@pytest.mark.cli
def test_missing_database_is_one_line_naming_it_and_how_to_create_it(tmp_path):
    name = f"rag_eval_missing_{uuid.uuid4().hex[:10]}"

    line = _one_line_error(_register_with(tmp_path, DAGSTER_PG_URL=f"postgresql://postgres@127.0.0.1:5432/{name}"))

    assert f'"{name}" does not exist' in line
    assert f'CREATE DATABASE "{name}"' in line
    with psycopg2.connect(dbname="postgres", **SERVER) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        assert cursor.fetchone() is None  # reported, not silently created


@pytest.mark.cli
def test_unreachable_server_is_one_line_without_the_password(tmp_path):
    url = "postgresql://postgres:hunter2@127.0.0.1:1/dagster"  # nothing listens on port 1

    line = _one_line_error(_register_with(tmp_path, DAGSTER_PG_URL=url))

    assert "cannot connect" in line and "127.0.0.1:1" in line
    assert "hunter2" not in line


@pytest.mark.postgres
@pytest.mark.cli
def test_register_on_an_existing_database_succeeds(tmp_path, postgres_url):
    url, database = postgres_url

    completed = _register_with(tmp_path, DAGSTER_PG_URL=url)

    assert completed.returncode == 0, completed.stderr
    with psycopg2.connect(dbname=database, **SERVER) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT partitions_def_name, partition FROM dynamic_partitions ORDER BY 1")
        assert cursor.fetchall() == [("dataset_version", "v1"), ("tenant", "acme")]
