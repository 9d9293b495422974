"""`rag-eval db upgrade`: create or migrate the results database's roles, schema and tables.

Connects as RAG_EVAL_DATABASE_ADMIN_URL (a superuser: it creates the cluster's roles); the pipeline
itself connects through RAG_EVAL_DATABASE_URL as rag_eval_worker (the workers, the daemon, an operator's
`rag-eval`) or rag_eval_service (the gate service), never with this URL. The upgrade's session carries the
same lock and statement timeouts as the pipeline's (RAG_EVAL_DATABASE_LOCK_TIMEOUT_S etc.).
"""

from __future__ import annotations

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import settings

ADMIN_URL_VARIABLE = "RAG_EVAL_DATABASE_ADMIN_URL"


@click.group(help="manage the results database of production mode", no_args_is_help=False)
def db() -> None:
    pass


@db.command(help=f"bring the results database to the code's schema revision (as {ADMIN_URL_VARIABLE})")
def upgrade() -> int:
    admin_url = settings().production.database_admin_url
    if not admin_url:
        raise BadInput(f"{ADMIN_URL_VARIABLE} is not set: give a superuser's postgresql:// URL of the results database")
    from rag_eval_pipeline.stores.database.upgrade import upgrade as upgrade_database

    click.echo(upgrade_database(admin_url))
    return 0
