"""The built-in metrics, one module each, each declaring `METRIC` (core/metrics/registry.py finds them)."""
