"""The judge's calibration on a tenant's labels: the judge scores the labelled items as `rag-eval evaluate`
would (score_items), and each labelled metric gets its agreement with the labels (core/trust/agreement.py:
accuracy, kappa, ROC-AUC, pairwise, with bootstrap intervals). No Dagster.

A calibration belongs to one judge identity: the judge's full name (its prompt hash included), k and the
sorted metric set, as on every score it makes. It is stored per tenant under that identity's key (two
tables: `calibration-<key>`, one row per metric, and `calibration-<key>-items`, the labelled items the
judge measured, for prediction-powered inference), and only a calibration of the very same identity is
ever loaded: another judge's agreement with the labels says nothing about this one.

Labelled items the judge did not measure (no statement to verify, an unusable reply) are counted with
their reasons, never scored 0. A labels file (`read_labels_file`) holds RAGAS's columns and a
`<metric>_label` column per labelled metric; it is checked whole before anything is stored.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.results import OK
from rag_eval_pipeline.core.metrics.registry import JUDGED_METRICS, scoring_name
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.core.trust.agreement import FIGURES, agreement
from rag_eval_pipeline.evaluation.labels import (
    LABEL_SUFFIX,
    items_with_labels,
    label_key,
    merged_labels,
    read_labels,
    store_labels,
)
from rag_eval_pipeline.evaluation.user_metrics import MetricError, metric_named, resolve_metrics
from rag_eval_pipeline.stores.protocols import ResultsStore

TABLE_PREFIX = "calibration-"
ITEMS_SUFFIX = "-items"
UNCALIBRATED = "uncalibrated"
UNCALIBRATED_NOTE = "uncalibrated (no labels of yours were scored by this judge)"
SAVE_ATTEMPTS = 3  # labels changed while the judge scored them: score the new set again, this many times at most

IDENTITY_COLUMNS = ["identity", "judge", "k", "metrics"]
FIGURE_COLUMNS = [f"{name}{part}" for name in FIGURES for part in ("", "_low", "_high")]
SUMMARY_COLUMNS = [
    *IDENTITY_COLUMNS,
    "metric",
    "n_labels",
    "n_measured",
    "n_unmeasured",
    "unmeasured_reasons",
    "n_good",
    "graded",
    "best_threshold",
    *FIGURE_COLUMNS,
    *(f"{name}_note" for name in FIGURES),
    "n_pairs",
    "labels_digest",
    "created_at",
]
ITEM_COLUMNS = ["label_key", "metric", "score", "label", "pair_id"]


@dataclass(frozen=True)
class JudgeIdentity:
    """What makes a judge's scores what they are: its full name, k and the metric set it scored together."""

    judge: str
    k: int
    metrics: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(sorted(set(self.metrics))))
        object.__setattr__(self, "k", int(self.k))

    def key(self) -> str:
        """16 hex digits of sha256 over the three fields: the same identity always gives the same key."""
        material = json.dumps([self.judge, self.k, list(self.metrics)], ensure_ascii=False)
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]

    @property
    def table(self) -> str:
        return f"{TABLE_PREFIX}{self.key()}"

    @property
    def items_table(self) -> str:
        return f"{self.table}{ITEMS_SUFFIX}"

    def __str__(self) -> str:
        return f"judge {self.judge}, k {self.k}, metrics {','.join(self.metrics)} (identity {self.key()})"


@dataclass(frozen=True)
class LabelledItem:
    item: EvalItem
    labels: dict[str, float]  # {metric: label in [0, 1]}
    pair_id: str = ""  # items sharing it answer one question (pairwise agreement)


@dataclass(frozen=True)
class Calibration:
    identity: JudgeIdentity
    summary: pd.DataFrame  # SUMMARY_COLUMNS, one row per labelled metric
    items: pd.DataFrame  # ITEM_COLUMNS, one row per labelled item the judge measured, per metric

    def row(self, metric: str) -> dict | None:
        rows = self.summary[self.summary["metric"] == metric].to_dict("records")
        return rows[0] if rows else None


def judge_identity(judge, k: int, metrics: Sequence[str]) -> JudgeIdentity:
    """The identity of a judge scoring these metrics at k, as its score rows name it (scoring_name)."""
    return JudgeIdentity(scoring_name(judge.name, resolve_metrics(metrics)), k, tuple(metrics))


# --- calibrating ---------------------------------------------------------------------------------------


def calibrate(
    labelled: Sequence[LabelledItem], judge, embedder, identity: JudgeIdentity, labels_digest: str = ""
) -> Calibration:
    """Score the labelled items with the judge (the metrics and k of the identity) and measure, for each
    labelled metric, how far its scores agree with the labels. Raises ValueError when the identity is not
    this judge's or a label's metric is not among the identity's metrics."""
    metrics = resolve_metrics(identity.metrics)
    if identity.judge != scoring_name(judge.name, metrics):
        raise ValueError(f"the identity names judge {identity.judge!r} but the judge is {judge.name!r}")
    labelled = _unique(labelled)
    outside = sorted({m for entry in labelled for m in entry.labels} - set(identity.metrics))
    if outside:
        raise ValueError(
            f"labels of {', '.join(outside)}, not among the metrics scored ({', '.join(identity.metrics)})"
        )
    results, _ = score_items([e.item for e in labelled], judge, embedder, metrics=metrics, k=identity.k)
    cells = _cells(labelled, results)
    created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    labelled_metrics = [m for m in identity.metrics if any(m in e.labels for e in labelled)]
    summary = [_summary_row(identity, m, cells[cells["metric"] == m], labels_digest) for m in labelled_metrics]
    table = pd.DataFrame(summary, columns=SUMMARY_COLUMNS).assign(created_at=created_at)
    measured = cells[cells["status"] == OK][ITEM_COLUMNS].reset_index(drop=True)
    return Calibration(identity, _typed_summary(table), measured.astype({"score": float, "label": float}))


def _unique(labelled: Sequence[LabelledItem]) -> list[LabelledItem]:
    """One entry per item (its label key), a later label of a metric replacing an earlier one."""
    merged: dict[str, LabelledItem] = {}
    for entry in labelled:
        key = label_key(entry.item)
        earlier = merged.get(key)
        labels = {**earlier.labels, **entry.labels} if earlier else dict(entry.labels)
        merged[key] = LabelledItem(entry.item, labels, entry.pair_id or (earlier.pair_id if earlier else ""))
    return list(merged.values())


def _cells(labelled: list[LabelledItem], results) -> pd.DataFrame:
    """One row per (item, labelled metric): its score, status and reason beside the label."""
    rows = []
    for entry, item_results in zip(labelled, results):
        by_metric = {result.metric: result for result in item_results}
        for metric, label in entry.labels.items():
            result = by_metric[metric]
            rows.append(
                {
                    "label_key": label_key(entry.item),
                    "metric": metric,
                    "score": result.score,
                    "label": float(label),
                    "pair_id": entry.pair_id,
                    "status": result.status,
                    "reason": result.reason,
                }
            )
    return pd.DataFrame(rows, columns=[*ITEM_COLUMNS, "status", "reason"])


def _summary_row(identity: JudgeIdentity, metric: str, cells: pd.DataFrame, labels_digest: str) -> dict:
    measured = cells[cells["status"] == OK]
    figures = agreement(measured["score"].to_numpy(float), measured["label"].to_numpy(float), list(measured["pair_id"]))
    reasons = Counter(cells.loc[cells["status"] != OK, "reason"])
    return {
        "identity": identity.key(),
        "judge": identity.judge,
        "k": identity.k,
        "metrics": ",".join(identity.metrics),
        "metric": metric,
        "n_labels": len(cells),
        "n_measured": len(measured),
        "n_unmeasured": len(cells) - len(measured),
        "unmeasured_reasons": "; ".join(f"{count} {reason}" for reason, count in reasons.most_common()),
        **figures.as_row(),
        "labels_digest": labels_digest,
    }


def _typed_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Nullable floats: an undefined figure is <NA> beside its note, never NaN."""
    floats = ["best_threshold", *FIGURE_COLUMNS]
    ints = ["k", "n_labels", "n_measured", "n_unmeasured", "n_good", "n_pairs"]
    return table.astype({**dict.fromkeys(floats, "Float64"), **dict.fromkeys(ints, "int64"), "graded": bool})


# --- a tenant's calibration: stored and loaded by identity ----------------------------------------------


def calibrate_tenant(
    store: ResultsStore, tenant: str, judge, embedder, identity: JudgeIdentity, new_labels: Sequence[dict] = ()
) -> Calibration:
    """Calibrate on the tenant's stored labels of the identity's metrics, with new_labels (label rows)
    added, and store both. The judge scores first: if it fails, nothing is stored. Written under the
    calibration's lock, and only if the labels are still those that were scored: labels stored meanwhile
    (another import) are scored too, so the stored calibration covers every label."""
    for _ in range(SAVE_ATTEMPTS):
        labels = _with_new(store, tenant, identity.metrics, new_labels)
        if labels.empty:
            raise ValueError(f"tenant {tenant} has no labels of {', '.join(identity.metrics)}")
        digest = labels_digest(labels)
        calibration = calibrate(labelled_items(labels), judge, embedder, identity, digest)
        with store.tenant_table_lock(tenant, identity.table):
            if labels_digest(_with_new(store, tenant, identity.metrics, new_labels)) == digest:
                if new_labels:
                    store_labels(store, tenant, list(new_labels))
                _write(store, tenant, calibration)
                return calibration
    raise TimeoutError(f"{tenant}'s labels changed {SAVE_ATTEMPTS} times while the judge scored them: re-run")


def _with_new(store: ResultsStore, tenant: str, metrics: Sequence[str], new_labels: Sequence[dict]) -> pd.DataFrame:
    labels = merged_labels(read_labels(store, tenant), list(new_labels)) if new_labels else read_labels(store, tenant)
    return labels[labels["metric"].isin(list(metrics))].reset_index(drop=True)


def tenant_labels(store: ResultsStore, tenant: str, metrics: Sequence[str]) -> pd.DataFrame:
    labels = read_labels(store, tenant)
    return labels[labels["metric"].isin(list(metrics))].reset_index(drop=True)


def labels_digest(labels: pd.DataFrame) -> str:
    """Which labels a calibration was made on: sha256 over (item, metric, label, pair id), in any order."""
    rows = sorted(
        zip(
            labels["label_key"].astype(str),
            labels["metric"].astype(str),
            labels["label"].astype(float),
            labels["pair_id"].astype(str),
        )
    )
    return hashlib.sha256(json.dumps(rows).encode("utf-8")).hexdigest()[:16]


def labelled_items(labels: pd.DataFrame) -> list[LabelledItem]:
    """The stored labels (evaluation/labels.py) as labelled items, with their pair ids."""
    pair_ids = dict(zip(labels["label_key"].astype(str), labels["pair_id"].fillna("").astype(str)))
    return [LabelledItem(item, values, pair_ids.get(item.qa_id, "")) for item, values in items_with_labels(labels)]


def save_calibration(store: ResultsStore, tenant: str, calibration: Calibration) -> None:
    """Store both tables under the calibration's lock (a reader never sees one run's items with another's summary)."""
    with store.tenant_table_lock(tenant, calibration.identity.table):
        _write(store, tenant, calibration)


def _write(store: ResultsStore, tenant: str, calibration: Calibration) -> None:
    # The items first: a summary is only ever stored beside its items.
    store.write_tenant_table(tenant, calibration.identity.items_table, calibration.items)
    store.write_tenant_table(tenant, calibration.identity.table, calibration.summary)


def load_calibration(store: ResultsStore, tenant: str, identity: JudgeIdentity) -> Calibration | None:
    """The tenant's calibration by exactly this identity, or None (none stored, or another identity's)."""
    summary = store.read_tenant_table(tenant, identity.table)
    items = store.read_tenant_table(tenant, identity.items_table)
    if summary is None or items is None or summary.empty:
        return None
    stored = summary.iloc[0]
    same = (str(stored["judge"]), int(stored["k"]), str(stored["metrics"])) == (
        identity.judge,
        identity.k,
        ",".join(identity.metrics),
    )
    return Calibration(identity, summary, items) if same else None


# --- words ---------------------------------------------------------------------------------------------


def describe(row: Mapping | None) -> str:
    """One phrase for the report and the gate, e.g. 'calibrated on 48 labels: kappa 0.62 [0.41, 0.79],
    ROC-AUC 0.88 [0.79, 0.95]'; UNCALIBRATED_NOTE for no row."""
    if row is None:
        return UNCALIBRATED_NOTE
    labels, measured = int(row["n_labels"]), int(row["n_measured"])
    if measured == 0:
        return f"{UNCALIBRATED} (none of its {labels} labels was measured by this judge)"
    on = f"{labels} labels" if measured == labels else f"{measured} of {labels} labels ({labels - measured} unmeasured)"
    graded = " (graded labels cut at 0.5)" if bool(row.get("graded")) else ""
    return f"calibrated on {on}: kappa {figure_text(row, 'kappa', 2)}, ROC-AUC {figure_text(row, 'roc_auc', 2)}{graded}"


def figure_text(row: Mapping, name: str, decimals: int = 3) -> str:
    """'0.62 [0.41, 0.79]', '0.62 (no interval)' or 'n/a (its reason)'."""
    value = as_number(row.get(name))
    if value is None:
        return f"n/a ({row.get(f'{name}_note') or 'undefined'})"
    low, high = as_number(row.get(f"{name}_low")), as_number(row.get(f"{name}_high"))
    interval = f"[{low:.{decimals}f}, {high:.{decimals}f}]" if low is not None and high is not None else "(no interval)"
    return f"{value:.{decimals}f} {interval}"


def as_number(value) -> float | None:
    """A stored figure as a float; None for a missing one (None, <NA> or NaN)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


# --- a labels file ---------------------------------------------------------------------------------------


def read_labels_file(path: Path) -> list[LabelledItem]:
    """The labelled items of a JSONL, CSV or Parquet file with RAGAS's columns, `<metric>_label` columns
    (an empty cell: not labelled) and an optional `pair_id`. ValueError, naming the row and column, for
    a file that has no label column, a label column of an unknown or unjudged metric, a row that cannot
    be scored, or a label that is not a number in [0, 1]."""
    from rag_eval_pipeline.evaluation.tabular import read_rows, to_items

    rows = read_rows(Path(path))
    if not rows:
        raise ValueError(f"labels file {path} holds no rows")
    columns = _label_columns(rows, path)
    items, bad = to_items(rows)
    if bad:
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        raise ValueError(f"labels file {path}, {bad[0].where} (id {bad[0].row_id}): {bad[0].reason}{more}")
    by_number = dict(items)
    labelled, first_row = [], {}
    for row in rows:
        labels = {c.removesuffix(LABEL_SUFFIX): v for c in columns if (v := _label(row, c, path)) is not None}
        if labels:
            item = by_number[row.number]
            key = label_key(item)
            if key in first_row:  # the same texts twice: which label is meant is the team's to say
                raise ValueError(
                    f"labels file {path}, {row.where}: the same question, contexts, answer and ground truth "
                    f"as {first_row[key]}; label each item once"
                )
            first_row[key] = row.where
            labelled.append(LabelledItem(item, labels, _pair_id(row.record.get("pair_id"))))
    if not labelled:
        raise ValueError(f"labels file {path} holds no label: every {LABEL_SUFFIX} cell is empty")
    return labelled


def _label_columns(rows, path: Path) -> list[str]:
    keys = list(dict.fromkeys(str(key) for row in rows for key in row.record))
    for key in keys:  # a label column misspelt or repeated would be dropped without a word
        if LABEL_SUFFIX in key.lower() and not key.endswith(LABEL_SUFFIX):
            raise ValueError(
                f"labels file {path}, column {key}: not a label column name; name it <metric>{LABEL_SUFFIX} "
                "(lower case), once per metric"
            )
    columns = [key for key in keys if key.endswith(LABEL_SUFFIX)]
    if not columns:
        raise ValueError(
            f"labels file {path} has no label column: name one <metric>{LABEL_SUFFIX}, e.g. faithfulness{LABEL_SUFFIX}"
        )
    for column in columns:
        metric = str(column).removesuffix(LABEL_SUFFIX)
        try:
            judged = metric_named(metric).judged
        except MetricError:
            raise ValueError(
                f"labels file {path}, column {column}: unknown metric {metric!r}; judged built-in metrics: "
                f"{', '.join(JUDGED_METRICS)}"
            ) from None
        if not judged:
            raise ValueError(
                f"labels file {path}, column {column}: {metric} is computed without the judge: nothing to calibrate"
            )
    return columns


PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _label(row, column: str, path: Path) -> float | None:
    """The cell as a label; None for an empty cell."""
    value = row.record.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (bool, np.bool_)):
        value = float(value)
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return None  # an empty cell of a Parquet or JSONL float column
    try:
        if isinstance(value, str) and not PLAIN_NUMBER.fullmatch(value.strip()):
            raise ValueError(value)  # float() also takes "0_1", "nan" and non-ASCII digits
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        number = None
    except OverflowError:  # an integer too large for a float is outside [0, 1]
        number = math.inf
    if number is None or not isinstance(value, (str, numbers.Real)):
        raise ValueError(f"labels file {path}, {row.where}, column {column}: {value!r} is not a number")
    if not (math.isfinite(number) and 0 <= number <= 1):
        raise ValueError(f"labels file {path}, {row.where}, column {column}: {value!r} is outside [0, 1]")
    return number


def _pair_id(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()
