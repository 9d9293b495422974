"""A team's own metrics, beside the built-in ones, wherever a metric is named.

A metric is named three ways: a built-in name (`faithfulness`); `package.module:attribute`, code of the
team's, imported only from a package that RAG_EVAL_CANDIDATE_MODULES allows (the allow-list of candidate
modules: naming a metric must not run arbitrary code); or the name of an installed entry point of the group
`rag_eval_pipeline.metrics` (installing the package is the consent). The name a metric is given is the
name it has everywhere (a score table's `metric` column, the report, `--metrics`), so any process of the
lineage can load it again from the name alone.

What the name points at:
- a function of the item (`fn(item) -> score`), or, when decorated with `@metric(needs=[...])`, of the
  item and the judge's judgement (`fn(item, judgement)`); it returns a number in [0, 1], `Unmeasured`
  with a reason, or a MetricResult. A raise, a NaN or a number outside [0, 1] makes the item unmeasured,
  with that reason: a metric of ours or theirs never scores what it could not measure;
- a `Criterion` (core/judging/criteria.py), graded by the LLM judge;
- a `Metric` (core/metrics/registry.py).
Its identity (a declared version, else a hash of the function's source or of the criterion) joins the
judge's name in each score row, so a changed metric is a new scoring, never compared with the old.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import inspect
import math
import numbers
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from typing import Any

from rag_eval_pipeline.core.judging.criteria import OFFLINE_CANNOT_GRADE, Criterion, normalised
from rag_eval_pipeline.core.judging.judgement import PRIMITIVES, Failure
from rag_eval_pipeline.core.judging.results import NOT_APPLICABLE_PREFIX, MetricResult, measured, unmeasured
from rag_eval_pipeline.core.metrics.metric import Metric, Scoring
from rag_eval_pipeline.core.metrics.registry import BUILTIN, BUILTIN_METRICS

ENTRY_POINT_GROUP = "rag_eval_pipeline.metrics"
REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
MARK = "__rag_eval_metric__"  # set by @metric on the function it decorates
NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")
RESERVED_NAMES = frozenset({"id", "error"})  # columns of `rag-eval evaluate`'s output beside the metrics'
STATUS_SUFFIX = "_status"


class MetricError(ValueError):
    """A metric that cannot be named or loaded; the message is one line."""


@dataclass(frozen=True)
class Unmeasured:
    """What a metric function returns when it cannot score an item. not_applicable: the metric does not
    apply to this item (left out of coverage, like a built-in metric on an item without a ground truth);
    otherwise it counts against coverage, like a judge that could not decide."""

    reason: str
    not_applicable: bool = False


@dataclass(frozen=True)
class _Declared:
    needs: tuple[str, ...]
    tolerance: float | None
    version: str
    name: str


def metric(
    function: Callable | None = None,
    *,
    needs: Sequence[str] = (),
    tolerance: float | None = None,
    version: str = "",
    name: str = "",
):
    """Declare a metric function: the judge's primitive judgements it reads (then it is called as
    fn(item, judgement)), its default tolerance, and its version (default: a hash of its source). name:
    the metric's name when the function is passed as an object (by reference it is the reference).
    The function itself is returned unchanged, so it can still be called and tested directly."""

    unknown = sorted(set(needs) - set(PRIMITIVES))
    if unknown:
        raise MetricError(f"unknown judgements {unknown} in needs; known: {', '.join(PRIMITIVES)}")
    _check_tolerance(tolerance, name or "the metric")

    def mark(fn: Callable) -> Callable:
        setattr(fn, MARK, _Declared(tuple(needs), tolerance, str(version), name))
        return fn

    return mark(function) if function is not None else mark


def criterion(
    text: str,
    steps: Sequence[str] = (),
    reads: Sequence[str] = ("question", "answer"),
    name: str = "",
    tolerance: float | None = None,
) -> Criterion:
    """A criterion metric, graded 1 to 5 by the LLM judge (core/judging/criteria.py)."""
    _check_tolerance(tolerance, name or "the criterion")
    if not isinstance(text, str):
        raise MetricError(f"a criterion's text is a sentence saying what a good answer does, got {text!r}")
    for what, texts in (("steps", steps), ("reads", reads)):
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise MetricError(f"a criterion's {what} is a list of strings, got {texts!r}")
    try:
        return Criterion(text, tuple(steps), tuple(reads), name, tolerance)
    except ValueError as error:
        raise MetricError(str(error)) from None


# ---- naming and loading -----------------------------------------------------------------------


def resolve_metrics(metrics: Iterable[str | Metric | Callable | Criterion], allowed: Sequence[str] | None = None):
    """Metric objects for a metric set as a command, a run config or the API names it, each once, in the
    order given; MetricError (one line) for a name that is unknown, not allowed or broken.
    allowed: the packages a module path may name (default: RAG_EVAL_CANDIDATE_MODULES)."""
    resolved: dict[str, Metric] = {}
    for given in metrics:
        found = as_metric(given, allowed)
        if found.name in resolved and resolved[found.name] is not found:
            if resolved[found.name].identity != found.identity:
                raise MetricError(f"two different metrics are named {found.name!r}")
        resolved.setdefault(found.name, found)
    return tuple(resolved.values())


def as_metric(given: str | Metric | Callable | Criterion, allowed: Sequence[str] | None = None) -> Metric:
    """One metric: by name (see the module docstring) or as an object."""
    if isinstance(given, Metric):
        return given if BUILTIN.get(given.name) is given else _wrapped(given, given.name)
    if isinstance(given, str):
        return metric_named(given.strip(), tuple(allowed) if allowed is not None else None)
    if isinstance(given, Criterion) or callable(given):
        return _wrapped(given, _object_name(given))
    raise MetricError(f"{given!r} is not a metric: give a name, a function, a criterion or a Metric")


def parse_metric_list(text: str) -> list[str]:
    """A comma-separated --metrics value (or RAG_EVAL_METRICS), each name once, in order."""
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def metric_named(name: str, allowed: tuple[str, ...] | None = None) -> Metric:
    """The metric of this name; the allow-list is checked at every call (the environment may change), the
    code loaded once per process."""
    if name in BUILTIN:
        return BUILTIN[name]
    if REFERENCE.fullmatch(name):
        prefixes = _require_allowed(name, allowed)
        _require_code_allowed(name, _code_origins(_imported(name)), prefixes)
    return _loaded(name)


@functools.lru_cache(maxsize=256)
def _loaded(name: str) -> Metric:
    if REFERENCE.fullmatch(name):
        return _wrapped(_imported(name), name)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return _wrapped(_loaded_entry_point(entry), name)
    raise MetricError(
        f"unknown metric {name!r}; built-in: {', '.join(BUILTIN_METRICS)}; a metric of your own is named "
        f"package.module:function (a package RAG_EVAL_CANDIDATE_MODULES allows) or by an installed entry point "
        f"of group {ENTRY_POINT_GROUP}"
    )


def is_judged(name: str) -> bool:
    """Whether the metric of this name is scored from the judge's verdicts (calibration and PPI apply).
    A name that no longer loads is taken as judged: its calibration is then shown as missing, not hidden."""
    try:
        return metric_named(name).judged
    except MetricError:
        return True


def _require_allowed(reference: str, allowed: tuple[str, ...] | None) -> tuple[str, ...]:
    """The allowed packages, once the reference's module is among them."""
    from rag_eval_pipeline.evaluation.candidates import CandidateError, allowed_entry_modules, check_entry_allowed

    try:
        prefixes = allowed if allowed is not None else allowed_entry_modules()
        check_entry_allowed(reference, prefixes)
    except CandidateError as error:
        raise MetricError(f"metric {str(error).removeprefix('entry ')}") from None
    return prefixes


def _require_code_allowed(reference: str, origins: list[str], prefixes: tuple[str, ...]) -> None:
    """An allowed module may hold code from elsewhere (`from os import system`): what runs must be the team's."""
    for origin in origins:
        if not any(origin == prefix or origin.startswith(prefix + ".") for prefix in prefixes):
            raise MetricError(
                f"metric {reference!r} runs code of module {origin!r}, outside the allowed packages "
                f"({', '.join(prefixes)}; RAG_EVAL_CANDIDATE_MODULES)"
            )


def _code_origins(target: Any) -> list[str]:
    """The modules whose code a metric runs (a criterion runs none: the judge grades it)."""
    if isinstance(target, Criterion):
        return []
    return [_module_of(target.formula if isinstance(target, Metric) else target)]


def _module_of(code: Any) -> str:
    while isinstance(code, functools.partial):
        code = code.func
    target = code if inspect.isfunction(code) or inspect.ismethod(code) or inspect.isbuiltin(code) else type(code)
    return str(getattr(target, "__module__", "") or "")


@functools.lru_cache(maxsize=256)
def _imported(reference: str) -> Any:
    module_name, _, attribute = reference.partition(":")
    with _teams_code():
        try:
            target: Any = importlib.import_module(module_name)
        except BaseException as error:  # the team's code: any failure to import, sys.exit() too, is one line
            if isinstance(error, KeyboardInterrupt):
                raise
            raise MetricError(f"cannot import metric module {module_name!r}: {type(error).__name__}: {error}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise MetricError(f"metric module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
        if inspect.ismodule(target):  # `team.m:sys.exit` would reach past the allowed package
            raise MetricError(f"metric {reference!r} names a module ({target.__name__}), not a metric of the module")
    return target


def _loaded_entry_point(entry) -> Any:
    with _teams_code():
        try:
            return entry.load()
        except BaseException as error:  # an installed package's code: reported in one line, sys.exit() too
            if isinstance(error, KeyboardInterrupt):
                raise
            raise MetricError(
                f"cannot load metric {entry.name!r} (entry point {entry.value}): {type(error).__name__}: {error}"
            ) from None


@contextmanager
def _teams_code():
    """What the team's code prints goes to stderr: a command's stdout (its verdict, its table) stays ours."""
    with redirect_stdout(sys.stderr):
        yield


def _object_name(given: Callable | Criterion) -> str:
    declared = given.name if isinstance(given, Criterion) else getattr(getattr(given, MARK, None), "name", "")
    if declared:
        return declared
    if isinstance(given, Criterion):
        raise MetricError("a criterion passed as an object needs a name: criterion(..., name='politeness')")
    name = str(getattr(given, "__name__", ""))
    if not NAME.fullmatch(name):  # a lambda, a callable object: no name of its own
        raise MetricError(f"metric {given!r} needs a name: metric(..., name='my_metric')")
    return name


def _wrapped(target: Any, name: str) -> Metric:
    _check_name(name)
    if name in BUILTIN:
        raise MetricError(f"metric name {name!r} is a built-in metric's: name yours otherwise")
    if isinstance(target, Metric):
        guarded = functools.partial(_run_guarded, name=name, code=target.formula)
        return replace(target, name=name, formula=guarded, identity=target.identity or _code_version(target.formula))
    if isinstance(target, Criterion):
        return _criterion_metric(target, name)
    if callable(target):
        return _function_metric(target, name)
    raise MetricError(f"metric {name!r} is {type(target).__name__}, not a function, a criterion or a Metric")


def _check_name(name: str) -> None:
    """A metric's name is a column of every score table: it must not take another column's place."""
    if not NAME.fullmatch(name) or name in RESERVED_NAMES or name.endswith(STATUS_SUFFIX):
        raise MetricError(
            f"metric name {name!r} cannot be a column name: letters, digits and _ . : - only, not "
            f"{', '.join(sorted(RESERVED_NAMES))} and not ending in {STATUS_SUFFIX}"
        )


def _check_tolerance(tolerance: float | None, what: str) -> None:
    if tolerance is not None and not (isinstance(tolerance, numbers.Real) and 0 <= tolerance <= 1):
        raise MetricError(f"{what}: tolerance must be between 0 and 1 (a drop of a mean score), got {tolerance!r}")


# ---- a function as a metric ----------------------------------------------------------------------


def _function_metric(function: Callable, name: str) -> Metric:
    declared = getattr(function, MARK, None) or _Declared((), None, "", "")
    call = functools.partial(_call_function, function, declared.needs)
    return Metric(
        name,
        functools.partial(_run_guarded, name=name, code=call),
        needs=declared.needs,
        tolerance=declared.tolerance,
        description=(inspect.getdoc(function) or "").split("\n")[0],
        identity=declared.version or _code_version(function, declared.needs),
        summary=_generic_summary,
    )


def _call_function(function: Callable, needs: tuple[str, ...], scoring: Scoring) -> Any:
    for need in needs:
        value = getattr(scoring.judgement, need)
        if isinstance(value, Failure):  # the judge could not answer what the metric reads
            return value
    return function(scoring.item, scoring.judgement) if needs else function(scoring.item)


def _run_guarded(scoring: Scoring, name: str, code: Callable[[Scoring], Any]) -> MetricResult:
    """The team's code on a copy of the item and judgement (a metric cannot change what the next one reads),
    its prints on stderr; whatever it raises fails this item's score, never the run (Ctrl-C aside)."""
    own = Scoring(copy.deepcopy(scoring.item), copy.deepcopy(scoring.judgement), scoring.embedder, scoring.k)
    try:
        with _teams_code():
            value = code(own)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        return unmeasured(name, f"metric {name} raised {type(error).__name__}: {error}")
    return _as_result(name, value)


def _as_result(name: str, value: Any) -> MetricResult:
    if isinstance(value, Failure):
        return unmeasured(name, value.reason)
    if isinstance(value, Unmeasured):
        reason = str(value.reason).strip() or "the metric gave no reason"
        # Prefixed either way: a reason of the team's must never read as one the gate treats otherwise.
        return unmeasured(name, (NOT_APPLICABLE_PREFIX if value.not_applicable else f"metric {name}: ") + reason)
    if isinstance(value, MetricResult):
        return replace(value, metric=name)
    if isinstance(value, numbers.Real) and math.isfinite(float(value)) and 0 <= float(value) <= 1:
        return measured(name, float(value))
    return unmeasured(name, f"metric {name} returned {value!r}, not a score in [0, 1]")


def _generic_summary(evidence: dict) -> str:
    return "; ".join(f"{key}: {value}" for key, value in evidence.items())


# ---- versions ------------------------------------------------------------------------------------------


def _code_version(code: Any, needs: tuple = ()) -> str:
    """A hash of what decides what the code computes, the same in every process: its module's source (any edit
    to the module is a new version), its qualified name, and its plain defaults, closure, constants and
    bound arguments. Declare version= to choose the version yourself."""
    material = repr((_material(code), needs))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:8]


def _material(code: Any) -> list:
    if isinstance(code, functools.partial):
        return ["partial", _material(code.func), _plain(code.args), _plain(code.keywords)]
    if inspect.ismethod(code):
        return ["method", _material(code.__func__), _plain(getattr(code.__self__, "__dict__", {}))]
    if inspect.isfunction(code):
        function = inspect.unwrap(code)
        cells = [cell.cell_contents for cell in function.__closure__ or ()]
        return [
            _module_source(function),
            function.__qualname__,
            _plain([function.__defaults__, function.__kwdefaults__, cells, function.__code__.co_consts]),
        ]
    return ["object", _module_source(type(code)), _plain(getattr(code, "__dict__", {}))]


def _module_source(code: Any) -> str:
    where = f"{getattr(code, '__module__', '')}:{getattr(code, '__qualname__', type(code).__qualname__)}"
    for holder in (inspect.getmodule(code), code):
        try:
            return inspect.getsource(holder) if holder is not None else where
        except (OSError, TypeError):  # defined where no source is kept (a REPL, a C function)
            continue
    return where


def _plain(value: Any) -> Any:
    """Plain data as it is, anything else by its type's name (a repr may hold a memory address)."""
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted(repr(_plain(v)) for v in value)
    return f"<{type(value).__qualname__}>"


# ---- a criterion as a metric -------------------------------------------------------------------------


def _criterion_metric(found: Criterion, name: str) -> Metric:
    return Metric(
        name,
        functools.partial(_grade, found, name),
        needs=(found,),
        tolerance=found.tolerance,
        description=found.text,
        identity=f"criterion-{found.key}",
        summary=lambda evidence: " | ".join(str(f) for f in evidence.get("step_findings", [])),
    )


def _grade(found: Criterion, name: str, scoring: Scoring) -> MetricResult:
    verdict = scoring.judgement.criteria.get(found.key)
    if verdict is None:  # a judge that does not grade criteria (a judge of a test, say)
        return unmeasured(name, OFFLINE_CANNOT_GRADE)
    if isinstance(verdict, Failure):
        return unmeasured(name, verdict.reason)
    return measured(name, normalised(verdict.score), grade=verdict.score, step_findings=verdict.findings)
