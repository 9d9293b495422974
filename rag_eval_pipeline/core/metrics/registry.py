"""The metric registry: each metric declared once, as a `Metric`; everything else is derived from it.

A metric names the primitive judgements it needs (core/judging/judgement.py; none for hit rate and MRR,
a `Criterion` for a criterion metric), its formula, the texts it embeds (embedded in one batch before the
formulas run), its default tolerance (None: the gate's) and how its evidence reads in a review sheet or a
failed assertion. The built-in metrics are the modules of core/metrics/builtin, one file each, found by
walking that package: a metric on an existing primitive is one new file there. The metric list, the
judges' needs, the LLM calls that serve a metric, the report, the review sheet and `--metrics` read this.

A team's own metrics (evaluation/user_metrics.py) are Metric objects too. They carry an `identity` (their
version), which joins the judge's name in each score row (`scoring_name`): a changed metric is then a
new scoring, never compared with the old one.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Sequence
from types import ModuleType

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Judgement
from rag_eval_pipeline.core.metrics import builtin
from rag_eval_pipeline.core.metrics.metric import Metric, Need


def discover(package: ModuleType) -> dict[str, Metric]:
    """The METRIC each module of the package declares, by name, in their positions' order."""
    found: list[Metric] = []
    for module in pkgutil.iter_modules(package.__path__):
        declared = getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "METRIC", None)
        if not isinstance(declared, Metric):
            raise TypeError(f"{package.__name__}.{module.name} declares no METRIC")
        found.append(declared)
    by_name = {metric.name: metric for metric in sorted(found, key=lambda m: (m.position, m.name))}
    if len(by_name) != len(found):
        raise ValueError(f"two metrics of {package.__name__} share a name")
    return by_name


BUILTIN: dict[str, Metric] = discover(builtin)
BUILTIN_METRICS: tuple[str, ...] = tuple(BUILTIN)
RETRIEVAL_METRICS: tuple[str, ...] = tuple(name for name, metric in BUILTIN.items() if not metric.judged)
JUDGED_METRICS: tuple[str, ...] = tuple(name for name, metric in BUILTIN.items() if metric.judged)


def resolve(metrics: Iterable[str | Metric]) -> tuple[Metric, ...]:
    """Metric objects: built-in names looked up, Metric objects as they are, each once. A name of a team's
    metric must be loaded first (evaluation/user_metrics.py); ValueError for a name that is not built in."""
    resolved: dict[str, Metric] = {}
    for metric in metrics:
        if isinstance(metric, str):
            if metric not in BUILTIN:
                raise ValueError(f"unknown metric {metric!r}; built-in: {', '.join(BUILTIN_METRICS)}")
            metric = BUILTIN[metric]
        resolved.setdefault(metric.name, metric)
    return tuple(resolved.values())


def names(metrics: Sequence[Metric]) -> tuple[str, ...]:
    return tuple(metric.name for metric in metrics)


def needed_judgements(metrics: Sequence[Metric]) -> set[Need]:
    """What the judge must answer for these metrics: primitive judgements and criteria."""
    return {need for metric in metrics for need in metric.needs}


def scoring_name(judge_name: str, metrics: Sequence[Metric]) -> str:
    """The judge column of a score row: the judge's name, and each of a team's metrics with its version, so
    that scores made by a changed metric are never compared with the old ones."""
    versioned = sorted((metric.name, metric.identity) for metric in metrics if metric.identity)  # any order given
    return judge_name + "".join(f"+{name}@{identity}" for name, identity in versioned)


def tolerances(metrics: Sequence[Metric]) -> dict[str, float]:
    """The tolerances the metrics declare (the others take the gate's)."""
    return {metric.name: metric.tolerance for metric in metrics if metric.tolerance is not None}


def embedded_texts(metrics: Sequence[Metric], items: Sequence[EvalItem], judgements: Sequence[Judgement]) -> list[str]:
    """Every text the metrics' formulas will embed, each once, for one batched embedding call."""
    texts = [
        text
        for metric in metrics
        if metric.embeds is not None
        for item, judgement in zip(items, judgements)
        for text in metric.embeds(item, judgement)
    ]
    return list(dict.fromkeys(texts))
