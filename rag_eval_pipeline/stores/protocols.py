"""The one storage seam: what every results store and every baseline store offers, whatever keeps it.

The local warehouse (stores/local.py, stores/local_baselines.py) and the results database
(stores/database/) implement these; `open_stores` (stores/__init__.py) decides which one a process
uses. Callers type against the protocols, never against a class, and never ask which one they hold.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Protocol

import pandas as pd

from rag_eval_pipeline.stores.layout import AuditReport, StoredReport

LOCK_TIMEOUT_S = 120.0  # the longest wait for a tenant's promotion lock
UNSET = object()  # "not given", where None is a meaningful value (no baseline yet)
# A candidate's outputs submitted before its run: kept per (tenant, version, commit) under a fresh id
# (uuid4 hex), which the run's config names instead of carrying the outputs themselves.
SUBMITTED_OUTPUTS = "submitted_outputs"
SUBMISSION_ID = re.compile(r"^[0-9a-f]{32}$")


class UnknownBaseline(ValueError):
    """A baseline commit that was never audited on this golden-set version."""


class BaselineChanged(RuntimeError):
    """Another run promoted a baseline between reading it and promoting (compare-and-set failed)."""


def validate_submission_id(submission_id: str) -> str:
    if not isinstance(submission_id, str) or not SUBMISSION_ID.fullmatch(submission_id):
        raise ValueError(f"invalid submission id {submission_id!r}: expected 32 lowercase hex digits")
    return submission_id


@dataclass(frozen=True)
class Pruned:
    """What a prune removed of one kind (or, in a dry run, would remove): how many, and their stored bytes."""

    kind: str  # "audits", "submitted outputs", "Dagster runs"
    count: int
    bytes: int


@dataclass(frozen=True)
class Promotion:
    tenant: str
    version: str
    commit: str
    reason: str
    branch: str
    promoted_at: str  # ISO 8601, UTC
    run_id: str


class TableStore(Protocol):
    """Where a version's tables are read from (the results store, or the object store for the large ones)."""

    def read(self, tenant: str, version: str, name: str) -> pd.DataFrame: ...


class ResultsStore(TableStore, Protocol):
    """A tenant's results: the golden sets and their manifests, the audit tables of each run, the reports."""

    def write(self, tenant: str, version: str, name: str, frame: pd.DataFrame) -> object: ...

    def exists(self, tenant: str, version: str, name: str) -> bool: ...

    def where(self, tenant: str, version: str, name: str) -> str: ...

    def read_text(self, tenant: str, version: str, filename: str) -> str | None: ...

    def write_text(self, tenant: str, version: str, filename: str, text: str) -> object: ...

    def text_location(self, tenant: str, version: str, filename: str) -> str: ...

    def manifest_texts(self, tenant: str) -> dict[str, str]: ...

    def version_lock(self, tenant: str, version: str) -> AbstractContextManager[None]: ...

    def write_audit_table(
        self, tenant: str, version: str, commit: str, run_id: str, name: str, frame: pd.DataFrame
    ) -> object: ...

    def read_audit_table(self, tenant: str, version: str, run_id: str, name: str) -> pd.DataFrame | None: ...

    def report_location(self, tenant: str, version: str, commit: str, run_id: str) -> PurePath: ...

    def write_report(
        self, tenant: str, version: str, commit: str, run_id: str, report: StoredReport, parameters: dict
    ) -> None: ...

    def read_report(self, tenant: str, version: str, run_id: str) -> StoredReport | None: ...

    def latest_reports(self, tenant: str, version: str, limit: int) -> list[AuditReport]:
        """The version's `limit` most recently stored reports of the tenant, newest first, each with its table:
        what the history view reads. Only this tenant's rows or folder are read."""
        ...

    def locations(self, tenant: str, version: str, run_id: str) -> list[str]: ...

    def write_submission(self, tenant: str, version: str, commit: str, submission_id: str, text: str) -> object: ...

    def read_submission(self, tenant: str, version: str, submission_id: str) -> str | None: ...

    # A tenant's own tables, of no dataset version: its human labels and its judges' calibrations.
    def write_tenant_table(self, tenant: str, name: str, frame: pd.DataFrame) -> object:
        """Replace the table whole (readers see the old rows or the new ones)."""
        ...

    def read_tenant_table(self, tenant: str, name: str) -> pd.DataFrame | None:
        """The table, or None when the tenant has none by that name."""
        ...

    def tenant_table_lock(self, tenant: str, name: str) -> AbstractContextManager[None]:
        """Held around a read-modify-write of the table, so two writers never lose each other's rows."""
        ...


class BaselineStore(Protocol):
    """A tenant's audited candidates and its history of promotions."""

    def archive(
        self, tenant: str, version: str, commit: str, scores: pd.DataFrame, outputs: pd.DataFrame, run_id: str = ...
    ) -> object: ...

    def mark_complete(self, tenant: str, version: str, commit: str, run_id: str) -> object: ...

    def audited_commits(self, tenant: str, version: str) -> list[str]: ...

    def audited(
        self, tenant: str, version: str, commit: str, run_id: str = ""
    ) -> tuple[pd.DataFrame, pd.DataFrame]: ...

    def locked(self, tenant: str) -> AbstractContextManager[None]: ...

    def promote(
        self,
        tenant: str,
        version: str,
        commit: str,
        reason: str,
        branch: str = "",
        run_id: str = "",
        expected_current: object = UNSET,
    ) -> Promotion: ...

    def history(self, tenant: str, version: str | None = None) -> list[Promotion]: ...

    def current(self, tenant: str, version: str) -> Promotion | None: ...

    def prune(
        self, tenant: str, older_than: datetime, keep: Collection[str] = (), dry_run: bool = False
    ) -> list[Pruned]:
        """Delete the tenant's audits and submitted outputs last written before older_than, except those of a
        commit that is or was a baseline, and those whose run id or submission id is in keep (runs in
        progress); never a version's own tables or its golden set. What was (dry_run: would be) removed, by
        kind."""
        ...
