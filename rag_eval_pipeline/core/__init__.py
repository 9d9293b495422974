"""Shared engines below the domains: names, text, files and tables, embeddings, the LLM client and
its call cache, the judges and metric formulas. Nothing here imports dagster (a test checks)."""
