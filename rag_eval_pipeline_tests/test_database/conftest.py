"""The results database's fixtures (support/postgres.py): one upgraded scratch database per session."""

from rag_eval_pipeline_tests.support.postgres import (  # noqa: F401 - fixtures
    app_database,
    private_server,
    scratch_database_factory,
    shared_admin_url,
    upgraded_database,
)
