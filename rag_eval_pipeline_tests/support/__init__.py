"""What the tests start or write for real: the local llama.cpp server, scratch Postgres databases, a
SeaweedFS S3 server, Celery workers with the Dagster daemon, and the awkward PDFs ingestion is tested on."""
