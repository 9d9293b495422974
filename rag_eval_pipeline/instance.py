"""The Dagster instance the CLI uses: the repo's dagster.yaml under a git-ignored DAGSTER_HOME.

Before Dagster loads the config, the settings it would fail on with a traceback (an unset
environment variable, a Postgres database that does not exist or cannot be reached) are checked
here and reported as one line saying what to fix.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml
from dagster import DagsterInstance
from dagster._core.errors import DagsterInvalidConfigError

from rag_eval_pipeline import settings

# A login of its own that owns the `dagster` database: every process of the instance holds this URL.
EXAMPLE_PG_URL = "postgresql://dagster@127.0.0.1:5432/dagster"


class InstanceConfigError(RuntimeError):
    """The Dagster instance config cannot be used, with what to fix."""


def local_instance(home: Path | None = None) -> DagsterInstance:
    """home (default: the settings' Dagster home, `$DAGSTER_HOME` or `./.dagster_home`); a dagster.yaml
    there is kept, else the repo's config is copied in."""
    home = home or settings.load().dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    repo_config = settings.INSTANCE_CONFIG_TEMPLATE
    if not config.exists() and repo_config.exists():
        shutil.copyfile(repo_config, config)
    os.environ["DAGSTER_HOME"] = str(home)
    check_instance_config(config)
    try:
        return DagsterInstance.get()
    except DagsterInvalidConfigError as error:
        problems = "; ".join(e.message for e in error.errors) or str(error).splitlines()[0]
        raise InstanceConfigError(f"invalid Dagster instance config {config}: {problems}") from None


def check_instance_config(config: Path) -> None:
    """InstanceConfigError for an unset variable the config reads, or a Postgres storage that cannot be used."""
    if not config.is_file():
        return  # Dagster's defaults: nothing to check
    try:
        instance_settings = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise InstanceConfigError(f"{config} is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(instance_settings, dict):
        raise InstanceConfigError(f"{config} must hold a YAML mapping of instance settings")
    for name in _env_references(instance_settings):
        if not os.environ.get(name):
            raise InstanceConfigError(_unset_message(name, config, _postgres_section(instance_settings)))
    postgres = _postgres_section(instance_settings)
    if postgres:
        _check_postgres(_connection_params(postgres))


def _postgres_section(instance_settings: dict) -> dict:
    storage = instance_settings.get("storage")
    postgres = storage.get("postgres") if isinstance(storage, dict) else None
    return postgres if isinstance(postgres, dict) else {}


def _env_references(node) -> list[str]:
    """Every variable named by an `{env: NAME}` value, as Dagster resolves them."""
    if isinstance(node, dict):
        if set(node) == {"env"} and isinstance(node["env"], str):
            return [node["env"]]
        return [name for value in node.values() for name in _env_references(value)]
    if isinstance(node, list):
        return [name for value in node for name in _env_references(value)]
    return []


def _unset_message(name: str, config: Path, postgres: dict) -> str:
    if postgres.get("postgres_url") == {"env": name}:
        return (
            f"environment variable {name} is not set; the Dagster instance config {config} stores runs in "
            f"Postgres at that URL: set it, e.g. {name}={EXAMPLE_PG_URL}"
        )
    return f"environment variable {name} is not set; the Dagster instance config {config} reads it"


def _resolve(value):
    return os.environ[value["env"]] if isinstance(value, dict) and "env" in value else value


def _connection_params(postgres: dict) -> dict:
    """psycopg2.connect keywords from `postgres_url` or `postgres_db`, the two ways Dagster takes them."""
    import psycopg2.extensions  # only a Postgres instance needs the driver

    if postgres.get("postgres_url"):
        try:
            return psycopg2.extensions.parse_dsn(str(_resolve(postgres["postgres_url"])))
        except psycopg2.ProgrammingError:  # libpq's message may quote the URL, password included
            raise InstanceConfigError(
                f"invalid Postgres URL in the Dagster instance config (expected e.g. {EXAMPLE_PG_URL})"
            ) from None
    fields = {key: _resolve(value) for key, value in (postgres.get("postgres_db") or {}).items()}
    keys = {"hostname": "host", "port": "port", "username": "user", "password": "password", "db_name": "dbname"}
    return {keys[key]: value for key, value in fields.items() if key in keys and value is not None}


def _check_postgres(params: dict) -> None:
    import psycopg2

    try:
        psycopg2.connect(**{"connect_timeout": 5, **params}).close()  # the URL may set its own
    except psycopg2.OperationalError as error:
        raise InstanceConfigError(_connection_problem(params, str(error))) from None


def _connection_problem(params: dict, message: str) -> str:
    """What went wrong and how to fix it, naming the server and database but never the password."""
    host, port = params.get("host") or "localhost", params.get("port") or 5432
    database, user = params.get("dbname") or params.get("user") or "postgres", params.get("user") or "postgres"
    first_line = message.strip().splitlines()[0] if message.strip() else "no reason given"
    if f'database "{database}" does not exist' in message:
        return (
            f'database "{database}" does not exist on the Postgres server at {host}:{port}; create it with '
            f"`psql -h {host} -p {port} -U {user} -d postgres -c 'CREATE DATABASE \"{database}\"'` "
            f"(or `createdb -h {host} -p {port} -U {user} {database}`)"
        )
    return f"cannot connect to Postgres at {host}:{port} (database {database!r}) for the Dagster instance: {first_line}"
