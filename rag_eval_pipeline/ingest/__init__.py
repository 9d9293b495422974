"""The ingestion domain: a tenant's documents read into page texts (PDF, Markdown, text; a file that
cannot be read is rejected with the reason), page furniture removed, and structure-aware chunks.
`parsing`, `furniture` and `chunking` know nothing of Dagster; `assets.py` and `definitions.py` are its
Dagster layer."""
