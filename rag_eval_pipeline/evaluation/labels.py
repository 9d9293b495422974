"""A tenant's human labels: what its people said about judged items, kept to calibrate the judge.

One row per (item, metric): the item's texts (question, contexts, answer, ground truth), the metric and
the label, 0/1 or a graded score in [0, 1]. Labels come from a labels file (`rag-eval calibrate --labels`)
or from a filled-in audit review sheet (`rag-eval review import`); they are stored in the tenant's results
store (a Parquet file locally, a row-level-secured table in production) and never depend on a judge: a
calibration runs the judge of the day over them.

An item is known by a key over its texts, so labelling the same item again replaces its label.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import pandas as pd

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.stores.protocols import ResultsStore

LABELS_TABLE = "judge_labels"
LABEL_SUFFIX = "_label"  # a labels file's column per metric: faithfulness_label, ...
LABEL_COLUMNS = [
    "label_key",
    "qa_id",
    "commit",
    "question",
    "contexts",  # JSON: [{"id": ..., "text": ...}, ...] in rank order
    "answer",
    "ground_truth",
    "pair_id",  # items sharing it answer one question: pairwise agreement compares them ('' for none)
    "metric",
    "label",
    "source",
    "labeled_at",
]


def label_key(item: EvalItem) -> str:
    """The item's identity for labels: its texts, not its id (a labels file's ids are the team's own)."""
    material = [item.question, item.answer, item.ground_truth, [c.get("text", "") for c in item.contexts]]
    return hashlib.sha256(json.dumps(material, ensure_ascii=False).encode("utf-8")).hexdigest()[:24]


def label_rows(
    item: EvalItem, labels: dict[str, float], source: str, commit: str = "", pair_id: str = ""
) -> list[dict]:
    """The rows of one item's labels ({metric: label}); each label must already be checked to lie in [0, 1]."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    common = {
        "label_key": label_key(item),
        "qa_id": item.qa_id,
        "commit": commit,
        "question": item.question,
        "contexts": json.dumps(item.contexts, ensure_ascii=False),
        "answer": item.answer,
        "ground_truth": item.ground_truth,
        "pair_id": pair_id,
        "source": source,
        "labeled_at": now,
    }
    return [{**common, "metric": metric, "label": float(value)} for metric, value in labels.items()]


def read_labels(store: ResultsStore, tenant: str) -> pd.DataFrame:
    """The tenant's labels (an empty table when it has none)."""
    frame = store.read_tenant_table(tenant, LABELS_TABLE)
    return pd.DataFrame(columns=LABEL_COLUMNS) if frame is None else frame


def store_labels(store: ResultsStore, tenant: str, rows: list[dict]) -> pd.DataFrame:
    """Add the rows to the tenant's labels in one replace, a newer label of an (item, metric) winning;
    under the table's lock, so two imports at once keep both. The whole table as stored."""
    with store.tenant_table_lock(tenant, LABELS_TABLE):
        merged = merged_labels(read_labels(store, tenant), rows)
        store.write_tenant_table(tenant, LABELS_TABLE, merged)
    return merged


def merged_labels(old: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """The stored labels with the rows added, a newer label of an (item, metric) winning."""
    new = pd.DataFrame(rows, columns=LABEL_COLUMNS)
    merged = pd.concat([old, new], ignore_index=True) if len(old) else new
    return merged.drop_duplicates(["label_key", "metric"], keep="last").reset_index(drop=True)


def items_with_labels(labels: pd.DataFrame) -> list[tuple[EvalItem, dict[str, float]]]:
    """Each labelled item once (its qa_id: the label key), with its labels by metric, in the order first labelled."""
    found: dict[str, tuple[EvalItem, dict[str, float]]] = {}
    for row in labels.itertuples(index=False):
        key = str(row.label_key)
        if key not in found:
            item = EvalItem(
                qa_id=key,
                question=str(row.question),
                answer=str(row.answer),
                contexts=json.loads(str(row.contexts)),
                ground_truth=str(row.ground_truth),
            )
            found[key] = (item, {})
        found[key][1][str(row.metric)] = float(row.label)  # type: ignore[arg-type]
    return list(found.values())
