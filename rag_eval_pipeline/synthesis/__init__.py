"""Synthesis core: clustering chunks, generating QA items, verifying them. Knows nothing of Dagster."""
