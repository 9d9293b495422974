"""The tenant fixtures (see tenant_fixtures.py)."""

from rag_eval_pipeline_tests.tenant_fixtures import *  # noqa: F401,F403
