"""The synthesis domain: from chunks to a published golden set. Clusters and test nodes, the plan per
question type, the offline and LLM generators, the quality stage, verification, the great-expectations
suite, immutable versions and human review. The plain modules know nothing of Dagster (`pipeline.py`
runs them for `rag-eval synthesize`); `assets.py`, `checks.py`, `records.py` and `definitions.py` are
its Dagster layer."""
