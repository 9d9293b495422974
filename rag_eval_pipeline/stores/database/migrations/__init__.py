"""Alembic migrations of the results database, run by `rag_eval_pipeline.stores.database.upgrade`."""
