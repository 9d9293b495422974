"""The evaluation domain in Dagster: a candidate's outputs over the golden set, and their scores.

Resources, jobs, sensors and schedules are the code location's (rag_eval_pipeline/definitions.py),
which merges every domain's definitions.
"""

from dagster import Definitions, load_assets_from_modules

from rag_eval_pipeline.evaluation import assets

defs = Definitions(assets=load_assets_from_modules([assets]))
