"""Evaluation core: candidates, the judge, and the metrics. Knows nothing of Dagster."""
