"""Reporting core: aggregate scores, compare with the baseline, decide, render. Knows nothing of Dagster."""
