"""Judges (offline and LLM) and the metric formulas that turn their verdicts into scores."""
