"""Shared engines below the domains: names, text, files and tables (local Parquet and the object store),
the SQLite and Redis caches, embeddings, the reference retriever, the LLM client and its call cache, the
judges and metric formulas, and production mode's results database. Nothing here imports dagster (a test
checks), and nothing here imports a domain."""
