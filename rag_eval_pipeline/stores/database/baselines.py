"""Baselines in the results database (production mode), behind stores.protocols.BaselineStore, as the local ones.

Promotions of a tenant are serialized by a Postgres advisory lock (across processes and machines) and
checked against the baseline the promoter saw (compare-and-set), as in reporting/baselines.py.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import contextmanager
from datetime import datetime, timezone

import pandas as pd
from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from rag_eval_pipeline.core.names import validate_commit, validate_run_id
from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.connection import LOCK_TIMEOUT_VARIABLE, DatabaseError, LockNotGranted
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.stores.database.retention import prune_audits
from rag_eval_pipeline.stores.protocols import (
    LOCK_TIMEOUT_S,
    UNSET,
    BaselineChanged,
    Promotion,
    Pruned,
    UnknownBaseline,
)


class DatabaseBaselineStore:
    """The audits a baseline may be chosen from, and the promotions, of each tenant."""

    def __init__(self, store: DatabaseStore):
        self.store = store
        self.db = store.db

    def mark_complete(self, tenant: str, version: str, commit: str, run_id: str) -> str:
        missing = [
            name
            for name in ("metric_scores", "candidate_outputs")
            if self.store.read_audit_table(tenant, version, run_id, name, commit) is None
        ]
        if missing:
            raise FileNotFoundError(
                f"audit {tenant}/{version}/{commit}/{run_id} lacks {', '.join(missing)}: it cannot be archived"
            )
        row = {
            "tenant_id": tenant,
            "dataset_version": version,
            "commit": validate_commit(commit),
            "run_id": validate_run_id(run_id),
        }
        with self.db.tenant(tenant) as connection:
            connection.execute(pg_insert(schema.audited_archives).values(**row).on_conflict_do_nothing())
        return self.store.where(tenant, version, "audit", commit, run_id)

    def archive(
        self,
        tenant: str,
        version: str,
        commit: str,
        scores: pd.DataFrame,
        outputs: pd.DataFrame,
        run_id: str = "archive",
    ) -> str:
        self.store.write_audit_table(tenant, version, commit, run_id, "metric_scores", scores)
        self.store.write_audit_table(tenant, version, commit, run_id, "candidate_outputs", outputs)
        return self.mark_complete(tenant, version, commit, run_id)

    def audited_commits(self, tenant: str, version: str) -> list[str]:
        table = schema.audited_archives
        with self.db.tenant(tenant) as connection:
            found = connection.execute(select(table.c.commit).where(table.c.dataset_version == version).distinct())
            return sorted(found.scalars())

    def audited(self, tenant: str, version: str, commit: str, run_id: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
        chosen = self._audit_run(tenant, version, commit, run_id)
        if chosen is None:
            known = ", ".join(self.audited_commits(tenant, version)) or "none yet"
            raise UnknownBaseline(
                f"commit {commit!r} was never audited on {tenant}/{version}, so it cannot be "
                f"the baseline (audited commits: {known})"
            )
        scores = self.store.read_audit_table(tenant, version, chosen, "metric_scores", commit)
        outputs = self.store.read_audit_table(tenant, version, chosen, "candidate_outputs", commit)
        if scores is None or outputs is None:  # archived only once both were written (mark_complete)
            raise UnknownBaseline(f"the audit of {commit!r} (run {chosen}) on {tenant}/{version} lost its tables")
        return scores, outputs

    def _audit_run(self, tenant: str, version: str, commit: str, run_id: str = "") -> str | None:
        """run_id if that audit of the commit is complete, else the commit's latest complete audit."""
        table = schema.audited_archives
        with self.db.tenant(tenant) as connection:
            runs = (
                connection.execute(
                    select(table.c.run_id)
                    .where(
                        table.c.dataset_version == version,
                        table.c.commit == commit,
                    )
                    .order_by(table.c.created_at.desc(), table.c.run_id.desc())
                )
                .scalars()
                .all()
            )
        if run_id and run_id in runs:
            return run_id
        return runs[0] if runs else None

    @contextmanager
    def locked(self, tenant: str):
        """Hold the tenant's promotion lock (re-entrant in one thread, exclusive across processes and machines):
        a transaction-scoped advisory lock on a connection of its own, released when the block ends, however
        it ends. Waits at most LOCK_TIMEOUT_S, as the file lock does, and never longer than the database
        session's lock timeout; then a one-line DatabaseError, and nothing is promoted."""
        key = f"rag_eval.baseline.{tenant}"
        try:
            with self.db.exclusive(key, LOCK_TIMEOUT_S):
                yield
        except LockNotGranted as error:
            if error.key != key:  # another lock, taken inside the block
                raise
            raise DatabaseError(
                f"the baseline of {tenant} stayed locked by another session for {error.waited_s:g} s "
                f"({LOCK_TIMEOUT_VARIABLE}): nothing was promoted; try again once that session is done"
            ) from error

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
        with self.locked(tenant):  # the gate holds it already; an explicit promotion takes it here
            self.audited(tenant, version, commit)  # refuses a commit with nothing to compare against
            run_id = run_id or self._audit_run(tenant, version, commit) or ""
            table = schema.baseline_history
            with self.db.tenant(tenant) as connection:
                if expected_current is not UNSET:
                    now = _current_commit(connection, version)
                    if now != expected_current:
                        raise BaselineChanged(
                            f"the baseline of {tenant}/{version} changed from {expected_current or 'none'} to "
                            f"{now} while {commit} was audited; re-run the gate to compare with {now}"
                        )
                promoted_at = datetime.now(timezone.utc).replace(microsecond=0)
                connection.execute(
                    insert(table).values(
                        tenant_id=tenant,
                        dataset_version=version,
                        commit=commit,
                        reason=reason,
                        branch=branch,
                        run_id=run_id,
                        created_at=promoted_at,
                    )
                )
        return Promotion(tenant, version, commit, reason, branch, promoted_at.isoformat(), run_id)

    def history(self, tenant: str, version: str | None = None):
        table = schema.baseline_history
        query = select(
            table.c.dataset_version, table.c.commit, table.c.reason, table.c.branch, table.c.created_at, table.c.run_id
        ).order_by(table.c.id)
        if version is not None:
            query = query.where(table.c.dataset_version == version)
        with self.db.tenant(tenant) as connection:
            rows = connection.execute(query).all()
        return [
            Promotion(tenant, v, commit, reason, branch, at.astimezone(timezone.utc).isoformat(), run_id)
            for v, commit, reason, branch, at, run_id in rows
        ]

    def current(self, tenant: str, version: str):
        promotions = self.history(tenant, version)
        return promotions[-1] if promotions else None

    def prune(
        self, tenant: str, older_than: datetime, keep: Collection[str] = (), dry_run: bool = False
    ) -> list[Pruned]:
        """The tenant's audits and submitted outputs older than older_than, except a baseline commit's and
        those in keep (stores/database/retention.py), deleted in one transaction under the promotion lock."""
        with self.locked(tenant), self.db.tenant(tenant) as connection:
            return prune_audits(connection, older_than, keep, dry_run)


def _current_commit(connection, version: str) -> str | None:
    table = schema.baseline_history
    return connection.execute(
        select(table.c.commit).where(table.c.dataset_version == version).order_by(table.c.id.desc()).limit(1)
    ).scalar_one_or_none()
