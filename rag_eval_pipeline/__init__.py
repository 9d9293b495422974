"""RAG evaluation as one lineage of Dagster assets: documents -> chunks -> clusters -> synthetic QA ->
golden set -> candidate outputs -> metric scores -> regression report, with a CI gate (`rag-eval gate`).

The package reads as the lineage: `core` (shared engines, no Dagster) at the bottom, one package per
domain above it (`ingest`, `synthesis`, `evaluation`, `reporting`), each with plain modules and a thin
Dagster layer, then `automation`, `resources` and `cli` on top. The modules at this level are what the
Dagster layers share: the typed settings, the partitions, the asset metadata, the local instance and
the code location (`definitions.py`).
"""
