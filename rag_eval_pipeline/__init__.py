"""RAG evaluation as one lineage of Dagster assets: documents -> chunks -> clusters -> synthetic QA ->
golden set -> candidate outputs -> metric scores -> regression report, with a CI gate (`rag-eval gate`).

The Python API is here, imported on first use so that `import rag_eval_pipeline` stays instant:
`evaluate`, `aevaluate`, `synthesize`, `gate` (api.py); `metric`, `criterion` and `Unmeasured` for metrics
of your own (evaluation/user_metrics.py); `assert_rag` for tests (testing.py, also a pytest plugin).

The package reads as the lineage: `core` (shared engines, no Dagster) at the bottom, one package per
domain above it (`ingest`, `synthesis`, `evaluation`, `reporting`), each with plain modules and a thin
Dagster layer, then `automation`, `resources`, and the doors: `cli`, `service`, the API and the pytest
plugin. The modules at this level are what the Dagster layers share: the typed settings, the partitions,
the asset metadata, the local instance and the code location (`definitions.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_eval_pipeline.api import GateFailed, aevaluate, evaluate, gate, synthesize
    from rag_eval_pipeline.evaluation.evaluate import EvaluationResult
    from rag_eval_pipeline.evaluation.user_metrics import Unmeasured, criterion, metric
    from rag_eval_pipeline.reporting.verdict import GateVerdict
    from rag_eval_pipeline.testing import RagAssertionError, assert_rag

_EXPORTS = {
    "evaluate": "rag_eval_pipeline.api",
    "aevaluate": "rag_eval_pipeline.api",
    "synthesize": "rag_eval_pipeline.api",
    "gate": "rag_eval_pipeline.api",
    "GateFailed": "rag_eval_pipeline.api",
    "EvaluationResult": "rag_eval_pipeline.evaluation.evaluate",
    "GateVerdict": "rag_eval_pipeline.reporting.verdict",
    "metric": "rag_eval_pipeline.evaluation.user_metrics",
    "criterion": "rag_eval_pipeline.evaluation.user_metrics",
    "Unmeasured": "rag_eval_pipeline.evaluation.user_metrics",
    "assert_rag": "rag_eval_pipeline.testing",
    "RagAssertionError": "rag_eval_pipeline.testing",
}
__all__ = [
    "EvaluationResult",
    "GateFailed",
    "GateVerdict",
    "RagAssertionError",
    "Unmeasured",
    "aevaluate",
    "assert_rag",
    "criterion",
    "evaluate",
    "gate",
    "metric",
    "synthesize",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rag_eval_pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
