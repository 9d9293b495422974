"""The local store's baselines: every audited candidate kept by commit and run, and a history of promotions.

Layout in the warehouse:
  <tenant>/<version>/audits/commit=<commit>/run=<run_id>/   one audit: metric_scores.parquet,
      candidate_outputs.parquet, the report, and audit.json (written last: the audit is complete)
  <tenant>/baseline_history.jsonl   one line per promotion, oldest first; the last one per version is current
  <tenant>/baseline_history.lock    held while a baseline is read, compared with and promoted

`prune` deletes a tenant's audit folders and submitted outputs older than its retention, never those of
a commit in its baseline history, nor a version's own tables.

A baseline is a commit whose audit over a golden-set version completed; its latest complete audit is
what later candidates are compared with (`rag-eval gate --baseline COMMIT`). Promotions are serialized
per tenant by a lock and checked against the baseline the promoter saw (compare-and-set), so two gates
finishing together never both promote on the strength of the same comparison. The rules of when a
candidate is promoted are the reporting domain's (reporting/baselines.py); this module only keeps them.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from filelock import FileLock

from rag_eval_pipeline.core.files import atomic_write_parquet, atomic_write_text
from rag_eval_pipeline.core.names import RUN_ID_PATTERN
from rag_eval_pipeline.stores.layout import AUDITS_FOLDER, COMMIT_PREFIX, RUN_PREFIX, commit_of_folder
from rag_eval_pipeline.stores.local import SUBMISSIONS_FOLDER, Warehouse
from rag_eval_pipeline.stores.protocols import (
    LOCK_TIMEOUT_S,
    UNSET,
    BaselineChanged,
    Promotion,
    Pruned,
    UnknownBaseline,
)

HISTORY_FILE = "baseline_history.jsonl"
LOCK_FILE = "baseline_history.lock"
AUDIT_MARKER = "audit.json"
LEGACY_FOLDER = "audited"  # earlier layout, one folder per commit: <version>/audited/commit=<c>/; still read
SCORES, OUTPUTS = "metric_scores", "candidate_outputs"


class LocalBaselineStore:
    """Baselines as files beside the local warehouse's tables (see the module docstring)."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse

    # --- audited candidates ---

    def archive(
        self,
        tenant: str,
        version: str,
        commit: str,
        scores: pd.DataFrame,
        outputs: pd.DataFrame,
        run_id: str = "archive",
    ) -> Path:
        """Keep one audit of a commit; the marker is written last, so a half-archived audit is never read."""
        folder = self.warehouse.audit_dir(tenant, version, commit, run_id)
        for name, frame in ((SCORES, scores), (OUTPUTS, outputs)):
            atomic_write_parquet(folder / f"{name}.parquet", frame)
        return self.mark_complete(tenant, version, commit, run_id)

    def mark_complete(self, tenant: str, version: str, commit: str, run_id: str) -> Path:
        """Make an audit whose scores and outputs are already in its folder (written by the lineage) a baseline candidate."""
        folder = self.warehouse.audit_dir(tenant, version, commit, run_id)
        missing = [name for name in (SCORES, OUTPUTS) if not (folder / f"{name}.parquet").is_file()]
        if missing:
            raise FileNotFoundError(f"audit {folder} lacks {', '.join(missing)}: it cannot be archived")
        marker = {"tenant": tenant, "version": version, "commit": commit, "run_id": run_id, "archived_at": _now(6)}
        atomic_write_text(folder / AUDIT_MARKER, json.dumps(marker, sort_keys=True) + "\n")
        return folder

    def audited_commits(self, tenant: str, version: str) -> list[str]:
        root = self.warehouse.audits_dir(tenant, version)
        current = {commit_of_folder(f) for f in root.iterdir() if self._latest_audit(f)} if root.is_dir() else set()
        legacy = self.warehouse.partition_dir(tenant, version) / LEGACY_FOLDER
        earlier = (
            {commit_of_folder(f) for f in legacy.iterdir() if (f / f"{SCORES}.parquet").is_file()}
            if legacy.is_dir()
            else set()
        )
        return sorted(current | earlier)

    def audited(self, tenant: str, version: str, commit: str, run_id: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
        """(scores, outputs) of a commit's audit by run_id if it is complete, else its latest complete audit;
        UnknownBaseline, naming the audited ones, when there is none."""
        folder = self._audit_folder(tenant, version, commit, run_id)
        if folder is None:
            known = ", ".join(self.audited_commits(tenant, version)) or "none yet"
            raise UnknownBaseline(
                f"commit {commit!r} was never audited on {tenant}/{version}, so it cannot be the baseline "
                f"(audited commits: {known})"
            )
        return pd.read_parquet(folder / f"{SCORES}.parquet"), pd.read_parquet(folder / f"{OUTPUTS}.parquet")

    def _audit_folder(self, tenant: str, version: str, commit: str, run_id: str = "") -> Path | None:
        commit_dir = self.warehouse.commit_dir(tenant, version, commit)
        if run_id and RUN_ID_PATTERN.fullmatch(run_id):
            chosen = commit_dir / f"{RUN_PREFIX}{run_id}"
            if (chosen / AUDIT_MARKER).is_file():
                return chosen
        latest = self._latest_audit(commit_dir)
        if latest is not None:
            return latest
        legacy = self.warehouse.partition_dir(tenant, version) / LEGACY_FOLDER / commit_dir.name
        return legacy if (legacy / f"{SCORES}.parquet").is_file() else None

    @staticmethod
    def _latest_audit(commit_dir: Path) -> Path | None:
        markers = []
        for marker in commit_dir.glob(f"{RUN_PREFIX}*/{AUDIT_MARKER}"):
            markers.append(
                (json.loads(marker.read_text(encoding="utf-8"))["archived_at"], marker.parent.name, marker.parent)
            )
        return max(markers)[2] if markers else None

    # --- promotions ---

    @contextmanager
    def locked(self, tenant: str):
        """Hold the tenant's promotion lock (reentrant in one process, exclusive across processes)."""
        path = self.warehouse.tenant_dir(tenant) / LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path), timeout=LOCK_TIMEOUT_S, is_singleton=True):
            yield

    def promote(
        self,
        tenant: str,
        version: str,
        commit: str,
        reason: str,
        branch: str = "",
        run_id: str = "",
        expected_current=UNSET,
    ) -> Promotion:
        """Make an audited commit the baseline of (tenant, version), appending to the history.

        expected_current: the baseline commit (or None) the caller compared against; if another run has
        promoted since, BaselineChanged is raised and nothing is written.
        """
        with self.locked(tenant):
            self.audited(tenant, version, commit)  # refuses a commit with nothing to compare against
            if expected_current is not UNSET:
                current = self.current(tenant, version)
                now = current.commit if current else None
                if now != expected_current:
                    raise BaselineChanged(
                        f"the baseline of {tenant}/{version} changed from {expected_current or 'none'} to {now} "
                        f"while {commit} was audited; re-run the gate to compare with {now}"
                    )
            if not run_id:  # an explicit promotion names the audit it promotes: the commit's latest
                folder = self._audit_folder(tenant, version, commit)
                assert folder is not None  # audited() above found it
                run_id = folder.name.removeprefix(RUN_PREFIX) if folder.name.startswith(RUN_PREFIX) else ""
            promotion = Promotion(tenant, version, commit, reason, branch, _now(0), run_id)
            # The whole history is rewritten and renamed into place, never appended to: a writer killed
            # mid-way leaves the old file, and a torn line an older version left is not written after.
            promotions = [*read_history(self._history_path(tenant)), promotion]
            atomic_write_text(
                self._history_path(tenant), "".join(json.dumps(asdict(p), sort_keys=True) + "\n" for p in promotions)
            )
            return promotion

    def history(self, tenant: str, version: str | None = None) -> list[Promotion]:
        return [p for p in read_history(self._history_path(tenant)) if version is None or p.version == version]

    def current(self, tenant: str, version: str) -> Promotion | None:
        promotions = self.history(tenant, version)
        return promotions[-1] if promotions else None

    def _history_path(self, tenant: str) -> Path:
        return self.warehouse.tenant_dir(tenant) / HISTORY_FILE

    # --- retention ---

    def prune(
        self, tenant: str, older_than: datetime, keep: Collection[str] = (), dry_run: bool = False
    ) -> list[Pruned]:
        """Delete the tenant's audit folders and submitted outputs whose newest file is older than older_than,
        except a baseline commit's (any version's) and those named in keep (run or submission ids)."""
        with self.locked(tenant):  # no promotion between reading the history and deleting
            baselines = {promotion.commit for promotion in self.history(tenant)}
            cutoff = older_than.timestamp()
            root = self.warehouse.tenant_dir(tenant)
            audits = [
                p for p, commit, key in _audit_folders(root) if _prunable(p, commit, key, baselines, keep, cutoff)
            ]
            outputs = [p for p, commit, key in _submissions(root) if _prunable(p, commit, key, baselines, keep, cutoff)]
            pruned = [
                Pruned("audits", len(audits), sum(_bytes(p) for p in audits)),
                Pruned("submitted outputs", len(outputs), sum(_bytes(p) for p in outputs)),
            ]
            if not dry_run:
                for path in audits + outputs:
                    _remove(path)
        return pruned


def _audit_folders(tenant_dir: Path) -> Iterator[tuple[Path, str, str]]:
    """(folder, commit, run id) of every audit of the tenant, in this layout and the earlier one (no run id)."""
    for folder in tenant_dir.glob(f"*/{AUDITS_FOLDER}/{COMMIT_PREFIX}*/{RUN_PREFIX}*"):
        if folder.is_dir():
            yield folder, commit_of_folder(folder.parent), folder.name.removeprefix(RUN_PREFIX)
    for folder in tenant_dir.glob(f"*/{LEGACY_FOLDER}/{COMMIT_PREFIX}*"):
        if folder.is_dir():
            yield folder, commit_of_folder(folder), ""


def _submissions(tenant_dir: Path) -> Iterator[tuple[Path, str, str]]:
    """(file, commit, submission id) of every submission of the tenant."""
    for path in tenant_dir.glob(f"*/{SUBMISSIONS_FOLDER}/{COMMIT_PREFIX}*/*.jsonl"):
        yield path, commit_of_folder(path.parent), path.stem


def _prunable(path: Path, commit: str, key: str, baselines: set[str], keep: Collection[str], cutoff: float) -> bool:
    return commit not in baselines and key not in keep and _last_written(path) < cutoff


def _last_written(path: Path) -> float:
    """When anything in path (a file, or a folder and what it holds) was last written: an audit still being
    written is recent, and so is a file that vanished while it was looked at (a write renamed it)."""
    try:
        return max(inner.stat().st_mtime for inner in [path, *(path.rglob("*") if path.is_dir() else ())])
    except FileNotFoundError:
        return time.time()


def _bytes(path: Path) -> int:
    files = [path] if path.is_file() else [inner for inner in path.rglob("*") if inner.is_file()]
    return sum(inner.stat().st_size for inner in files if inner.exists())


def _remove(path: Path) -> None:
    """An audit folder or a submission file; the commit folder above stays (a gate of that commit may be
    creating a run folder in it now)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def read_history(path: Path) -> list[Promotion]:
    """The promotions in a history file, oldest first.

    A last line without its line break is a write that never finished (its writer was killed while
    appending, as versions before the atomic rewrite did): unless it is a whole promotion, it is not
    one, and is skipped. Any other line that is not a promotion is damage: ValueError naming the file
    and the line, since guessing the current baseline from a damaged history could gate against the wrong one.
    """
    if not path.is_file():
        return []
    *complete, last = path.read_text(encoding="utf-8").split("\n")
    promotions = [_promotion(path, number, line) for number, line in enumerate(complete, 1) if line.strip()]
    if last.strip():
        try:
            promotions.append(_promotion(path, len(complete) + 1, last))
        except ValueError:
            pass  # the torn tail of an unfinished append
    return promotions


def _promotion(path: Path, number: int, line: str) -> Promotion:
    try:
        return Promotion(**json.loads(line))
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"baseline history {path}, line {number}, is not a promotion ({error}): restore that "
            "line from a backup or remove it, then re-run"
        ) from None


def _now(digits: int) -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds" if digits else "seconds")
