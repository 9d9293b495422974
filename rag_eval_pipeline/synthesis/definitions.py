"""The synthesis domain in Dagster: clusters, synthetic QA, the verified golden set and its blocking check.

Resources, jobs, sensors and schedules are the code location's (rag_eval_pipeline/definitions.py),
which merges every domain's definitions.
"""

from dagster import Definitions, load_assets_from_modules

from rag_eval_pipeline.synthesis import assets
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS

defs = Definitions(assets=load_assets_from_modules([assets]), asset_checks=SYNTHESIS_CHECKS)
