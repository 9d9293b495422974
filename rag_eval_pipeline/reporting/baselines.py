"""Each tenant's baseline: every audited candidate kept by commit, and a history of promotions.

Layout in the warehouse:
  <tenant>/<version>/audited/commit=<commit>/metric_scores.parquet, candidate_outputs.parquet
  <tenant>/baseline_history.jsonl   one line per promotion, oldest first; the last one per version is current

A baseline is a commit whose scores over a golden-set version were archived when it was audited, so any
audited commit can be compared against (`rag-eval gate --baseline COMMIT`) or promoted later.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, unquote

import pandas as pd

from rag_eval_pipeline.reporting.compare import NOTHING_SCORED, PASS
from rag_eval_pipeline.warehouse import Warehouse

HISTORY_FILE = "baseline_history.jsonl"
AUDITED_FOLDER = "audited"
SCORES, OUTPUTS = "metric_scores", "candidate_outputs"
_COMMIT_PREFIX = "commit="  # keeps '.' or '..' commits from naming a parent folder

# Why a commit became the baseline.
EXPLICIT = "promoted explicitly"
FIRST_RUN = "first audited candidate of this golden-set version (proposed baseline)"


def passed_on(branch: str) -> str:
    return f"passed the gate on {branch}"


class UnknownBaseline(ValueError):
    """A baseline commit that was never audited on this golden-set version."""


@dataclass(frozen=True)
class Promotion:
    tenant: str
    version: str
    commit: str
    reason: str
    branch: str
    promoted_at: str  # ISO 8601, UTC
    run_id: str


def promotion_reason(verdict: str, had_baseline: bool, explicit: bool, branch: str, main_branch: str) -> str | None:
    """Why the audited candidate becomes the baseline, or None when it does not."""
    if verdict == NOTHING_SCORED:
        return None  # nothing to compare a later candidate with
    if explicit:
        return EXPLICIT
    if not had_baseline:
        return FIRST_RUN
    if verdict == PASS and branch and branch == main_branch:
        return passed_on(main_branch)
    return None


class BaselineStore:
    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse

    # --- audited candidates ---

    def archive(self, tenant: str, version: str, commit: str, scores: pd.DataFrame, outputs: pd.DataFrame) -> Path:
        """Keep a candidate's scores and answers; auditing the same commit again replaces them."""
        folder = self._commit_dir(tenant, version, commit)
        for name, frame in ((SCORES, scores), (OUTPUTS, outputs)):
            self.warehouse.write(tenant, version, f"{AUDITED_FOLDER}/{folder.name}/{name}", frame)
        return folder

    def audited_commits(self, tenant: str, version: str) -> list[str]:
        root = self.warehouse.partition_dir(tenant, version) / AUDITED_FOLDER
        if not root.is_dir():
            return []
        return sorted(
            unquote(path.name.removeprefix(_COMMIT_PREFIX))
            for path in root.iterdir()
            if path.name.startswith(_COMMIT_PREFIX) and (path / f"{SCORES}.parquet").is_file()
        )

    def audited(self, tenant: str, version: str, commit: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(scores, outputs) of an audited commit; UnknownBaseline, naming the audited ones, otherwise."""
        folder = self._commit_dir(tenant, version, commit)
        if not (folder / f"{SCORES}.parquet").is_file():
            known = ", ".join(self.audited_commits(tenant, version)) or "none yet"
            raise UnknownBaseline(
                f"commit {commit!r} was never audited on {tenant}/{version}, so it cannot be the baseline "
                f"(audited commits: {known})"
            )
        return pd.read_parquet(folder / f"{SCORES}.parquet"), pd.read_parquet(folder / f"{OUTPUTS}.parquet")

    def _commit_dir(self, tenant: str, version: str, commit: str) -> Path:
        if not commit:
            raise ValueError("a candidate needs a commit to be archived")
        folder = _COMMIT_PREFIX + quote(commit, safe="")
        return self.warehouse.partition_dir(tenant, version) / AUDITED_FOLDER / folder

    # --- promotions ---

    def promote(self, tenant: str, version: str, commit: str, reason: str, branch: str = "", run_id: str = "") -> Promotion:
        """Make an audited commit the baseline of (tenant, version), appending to the history."""
        self.audited(tenant, version, commit)  # refuses a commit with nothing to compare against
        promotion = Promotion(tenant, version, commit, reason, branch, _now(), run_id)
        path = self._history_path(tenant)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as history:
            history.write(json.dumps(asdict(promotion), sort_keys=True) + "\n")
        return promotion

    def history(self, tenant: str, version: str | None = None) -> list[Promotion]:
        path = self._history_path(tenant)
        if not path.is_file():
            return []
        promotions = [Promotion(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [p for p in promotions if version is None or p.version == version]

    def current(self, tenant: str, version: str) -> Promotion | None:
        promotions = self.history(tenant, version)
        return promotions[-1] if promotions else None

    def _history_path(self, tenant: str) -> Path:
        return self.warehouse.tenant_dir(tenant) / HISTORY_FILE


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
