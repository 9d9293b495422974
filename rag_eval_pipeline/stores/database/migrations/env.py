"""Alembic's entry point for this folder; the work is in `upgrade.run_migrations`.

Alembic runs this file with its `context` established; a plain import (a layer check walking the
package) finds no context and does nothing.
"""

from alembic import context

from rag_eval_pipeline.stores.database.upgrade import run_migrations


def _run_by_alembic() -> bool:
    try:
        context.is_offline_mode()
    except NameError:  # alembic's proxy is not established: imported, not run
        return False
    return True


if _run_by_alembic():
    if context.is_offline_mode():
        raise SystemExit("the results database migrations run online only: use `rag-eval db upgrade`")
    run_migrations(context)  # pyright: ignore[reportArgumentType] - alembic's context module proxies an EnvironmentContext
