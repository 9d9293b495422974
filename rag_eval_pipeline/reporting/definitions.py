"""The reporting domain in Dagster: the regression report and its blocking gate.

Resources, jobs, sensors and schedules are the code location's (rag_eval_pipeline/definitions.py),
which merges every domain's definitions.
"""

from dagster import Definitions, load_assets_from_modules

from rag_eval_pipeline.reporting import assets
from rag_eval_pipeline.reporting.checks import REPORTING_CHECKS

defs = Definitions(assets=load_assets_from_modules([assets]), asset_checks=REPORTING_CHECKS)
