"""The ingestion domain in Dagster: the tenant's documents (and those it could not read), then their chunks.

Resources, jobs, sensors and schedules are the code location's (rag_eval_pipeline/definitions.py),
which merges every domain's definitions.
"""

from dagster import Definitions, load_assets_from_modules

from rag_eval_pipeline.ingest import assets

defs = Definitions(assets=load_assets_from_modules([assets]))
