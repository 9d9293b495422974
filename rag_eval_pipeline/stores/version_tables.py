"""A dataset version's tables wherever they are stored, what each was built from, and when two are the same.

`VersionTables` routes a table to its store: locally everything is in the Warehouse; in production the
results tables are in the results database and the large ones in the object store (or, with no object
store, the local warehouse). The results store also keeps the manifest and the version's lock, so the
lock and the "is it published?" question are answered in one place.

Every table of a version carries its lineage in its Parquet metadata (pandas `attrs`): the step and run
that wrote it, and the digest of each stored table it was read from. A version is one snapshot when
each table was built from the tables stored beside it, and the tables one step writes together come
from one run of that step.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from rag_eval_pipeline.stores.protocols import ResultsStore, TableStore

LINEAGE_KEY = "rag_eval_lineage"  # the pandas attrs key; pandas keeps attrs in the Parquet metadata
# Derived scores (cluster membership, information, centrality, quality) are rounded to 4 or 2 decimals.
# Embeddings computed in another batch differ by about 1e-7, which can move a rounded score by one unit
# of its last decimal: 1e-4. Scores closer than 1e-3 are the same table; a real change of the documents
# changes ids, texts and hashes, which are compared exactly.
FLOAT_TOLERANCE = 1e-3


@dataclass(frozen=True)
class VersionTables:
    """Where each table of a (tenant, version) is: `results` keeps the `result_tables`, `large` the others."""

    results: ResultsStore
    large: TableStore
    result_tables: frozenset[str] = frozenset()

    def store_of(self, name: str) -> TableStore:
        return self.results if name in self.result_tables else self.large

    def read(self, tenant: str, version: str, name: str) -> pd.DataFrame:
        """The stored table, with its lineage in attrs; FileNotFoundError when there is none."""
        return self.store_of(name).read(tenant, version, name)

    def read_if_stored(self, tenant: str, version: str, name: str) -> pd.DataFrame | None:
        try:
            return self.read(tenant, version, name)
        except FileNotFoundError:
            return None

    def version_lock(self, tenant: str, version: str) -> AbstractContextManager:
        """Held by every write of a version's table and by its publication (exclusive across processes)."""
        return self.results.version_lock(tenant, version)


# ---- lineage -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lineage:
    step: str  # the step that wrote the table; one step may write several tables
    run_id: str
    inputs: dict[str, str] = field(default_factory=dict)  # table -> digest of the stored table it was read from


def stamped(frame: pd.DataFrame, lineage: Lineage) -> pd.DataFrame:
    """A shallow copy of the frame that carries its lineage (the caller's frame is left as it was)."""
    copy = frame.copy(deep=False)
    copy.attrs[LINEAGE_KEY] = json.dumps(asdict(lineage), sort_keys=True)
    return copy


def lineage_of(frame: pd.DataFrame) -> Lineage | None:
    """The lineage a stored table carries; None for a table written before tables carried one."""
    text = frame.attrs.get(LINEAGE_KEY)
    if not text:
        return None
    data = json.loads(text)
    return Lineage(
        step=str(data["step"]), run_id=str(data["run_id"]), inputs={str(k): str(v) for k, v in data["inputs"].items()}
    )


def drop_lineage(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without its lineage: pandas would carry it into every frame computed from this one."""
    frame.attrs.pop(LINEAGE_KEY, None)
    return frame


def table_digest(frame: pd.DataFrame) -> str:
    """sha256 of the table's content as Parquet (its lineage left out): a table read twice from the same
    stored bytes has the same digest."""
    return hashlib.sha256(_parquet(frame)).hexdigest()


# ---- the same table? ---------------------------------------------------------------------------


def differences(stored: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """What differs between a stored table and a new one, in a few words each; [] when they are the same.

    The new table goes through Parquet first, as storing it would, so types compare as stored. Floats
    are equal within FLOAT_TOLERANCE; everything else exactly.
    """
    new = _as_stored(new)
    if list(stored.columns) != list(new.columns):
        return [f"columns {list(new.columns)} instead of {list(stored.columns)}"]
    if len(stored) != len(new):
        return [f"{len(new)} rows instead of {len(stored)}"]
    changed = [str(c) for c in stored.columns if not _same_column(stored[c], new[c])]
    return [f"column {c} differs" for c in changed]


def _as_stored(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(_parquet(frame)))


def _parquet(frame: pd.DataFrame) -> bytes:
    """The table's content as Parquet bytes, without its attrs (the lineage)."""
    content = frame.copy(deep=False)
    content.attrs = {}
    buffer = io.BytesIO()
    content.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _same_column(stored: pd.Series, new: pd.Series) -> bool:
    if pd.api.types.is_float_dtype(stored) and pd.api.types.is_float_dtype(new):
        return bool(
            np.allclose(stored.to_numpy(float), new.to_numpy(float), rtol=0, atol=FLOAT_TOLERANCE, equal_nan=True)
        )
    return [_plain(v) for v in stored] == [_plain(v) for v in new]


def _plain(value):
    """A cell as plain Python: arrays (Parquet's lists) as lists, every missing value as None."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


# ---- one snapshot? -----------------------------------------------------------------------------


def snapshot_problems(tables: dict[str, pd.DataFrame | None], root: str = "golden_set") -> list[str]:
    """Why these tables (name -> stored table, None when missing) are not one snapshot; [] when they are.

    One snapshot: `root` and every table it was built from, directly or not, are there and carry their
    lineage; each table was built from the stored version of every table it read; and the tables one
    step writes together come from one run of that step. A table nothing in the root's lineage read is
    not required (a step's other outputs are held to their run by the last rule).
    """
    lineages = {name: lineage_of(frame) for name, frame in tables.items() if frame is not None}
    required = _built_from(root, lineages)
    problems = [f"{name} is missing" for name in sorted(required) if tables.get(name) is None]
    problems += [
        f"{name} does not say what it was built from (written before tables carried their lineage)"
        for name in sorted(required)
        if name in lineages and lineages[name] is None
    ]
    known = {name: lineage for name, lineage in lineages.items() if lineage is not None}
    digests = {name: table_digest(frame) for name, frame in tables.items() if frame is not None}
    for name, lineage in sorted(known.items()):
        for source, digest in sorted(lineage.inputs.items()):
            if source in digests and digests[source] != digest:
                problems.append(f"{name} (run {lineage.run_id}) was built from another {source} than the stored one")
    for step, runs in sorted(_runs_by_step(known.values()).items()):
        if len(runs) > 1:
            problems.append(f"the tables of step {step} were written by different runs ({', '.join(sorted(runs))})")
    return problems


def _built_from(root: str, lineages: dict[str, Lineage | None]) -> set[str]:
    """root and every table it was built from, following the recorded inputs."""
    found, pending = set(), [root]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.add(name)
        lineage = lineages.get(name)
        pending += list(lineage.inputs) if lineage is not None else []
    return found


def _runs_by_step(lineages: Iterable[Lineage]) -> dict[str, set[str]]:
    runs: dict[str, set[str]] = {}
    for lineage in lineages:
        runs.setdefault(lineage.step, set()).add(lineage.run_id)
    return runs
