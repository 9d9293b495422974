"""The tests: a folder per domain (`test_ingest`, `test_synthesis`, `test_evaluation`, `test_reporting`,
`test_automation`), marked by what they need (the markers are in pyproject.toml). `test_dagster/`
materializes the real lineage and runs real `rag-eval` processes, `test_llm/` runs the LLM judge against
the real local llama.cpp server, `test_ui/` drives the Dagster UI in headless Chromium, and
`test_database/`, `test_object_store/`, `test_production/` and `test_celery/` prove production mode on
real services, which `support/` starts. `fake_openai_server.py` is a named fake for HTTP faults;
`support/awkward_pdfs.py` writes the awkward documents ingestion is tested on."""
