"""Ingestion core: reading documents and chunking them. Knows nothing of Dagster."""
