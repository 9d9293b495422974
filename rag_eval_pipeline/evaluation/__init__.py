"""The evaluation domain: a candidate RAG pipeline run over the golden set (an entry point in a child
process, so it cannot end or stall the audit), and its answers scored per item and metric by the
judge; also the scoring of files of triplets (`rag-eval evaluate`). `candidates`, `candidate_process`,
`scoring` and `tabular` know nothing of Dagster; `assets.py` and `definitions.py` are its Dagster layer."""
