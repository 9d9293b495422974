"""The local store: Parquet tables on disk, one folder per (tenant, version).

The synthesis tables of a partition live in its folder. The audit tables (a candidate's outputs, its
scores and its report) live in a folder of their own per audited commit and run,
`<tenant>/<version>/audits/commit=<commit>/run=<run_id>/`, so concurrent audits of one tenant never
read or overwrite each other's rows. Outputs submitted before a run are one file per submission,
`<tenant>/<version>/submissions/commit=<commit>/<submission_id>.jsonl`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path, PurePath
from urllib.parse import quote

import pandas as pd
from filelock import FileLock, Timeout

from rag_eval_pipeline.core.files import atomic_write_parquet, atomic_write_text, create_text_once
from rag_eval_pipeline.core.names import validate_commit, validate_name, validate_run_id
from rag_eval_pipeline.stores.layout import (
    AUDITS_FOLDER,
    COMMIT_PREFIX,
    MANIFEST_FILE,
    REPORT_FILES,
    REPORT_TABLE,
    RUN_PREFIX,
    VERSION_LOCK_FILE,
    VERSION_LOCK_TIMEOUT_S,
    AuditReport,
    StoredReport,
    commit_of_folder,
    history_rows,
)
from rag_eval_pipeline.stores.protocols import validate_submission_id

SUBMISSIONS_FOLDER = "submissions"
# A tenant's tables of no dataset version; the dot keeps it apart from every version (names have none).
TENANT_TABLES_FOLDER = ".tenant-tables"


class Warehouse:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def tenant_dir(self, tenant: str) -> Path:
        return self.root / validate_name("tenant", tenant)

    def partition_dir(self, tenant: str, version: str) -> Path:
        return self.tenant_dir(tenant) / validate_name("dataset version", version)

    def audits_dir(self, tenant: str, version: str) -> Path:
        return self.partition_dir(tenant, version) / AUDITS_FOLDER

    def commit_dir(self, tenant: str, version: str, commit: str) -> Path:
        return self.audits_dir(tenant, version) / (COMMIT_PREFIX + quote(validate_commit(commit), safe=""))

    def audit_dir(self, tenant: str, version: str, commit: str, run_id: str) -> Path:
        """The folder of one audit: one commit, one run."""
        return self.commit_dir(tenant, version, commit) / (RUN_PREFIX + validate_run_id(run_id))

    def find_audit_dir(self, tenant: str, version: str, run_id: str) -> Path | None:
        """The audit folder a run wrote, whatever its commit (run ids are unique)."""
        pattern = f"{COMMIT_PREFIX}*/{RUN_PREFIX}{validate_run_id(run_id)}"
        found = sorted(self.audits_dir(tenant, version).glob(pattern))
        return found[0] if found else None

    def submissions_dir(self, tenant: str, version: str) -> Path:
        return self.partition_dir(tenant, version) / SUBMISSIONS_FOLDER

    def table_path(self, tenant: str, version: str, name: str) -> Path:
        return self.partition_dir(tenant, version) / f"{name}.parquet"

    def write(self, tenant: str, version: str, name: str, frame: pd.DataFrame) -> Path:
        return atomic_write_parquet(self.table_path(tenant, version, name), frame)

    def read(self, tenant: str, version: str, name: str) -> pd.DataFrame:
        path = self.table_path(tenant, version, name)
        if not path.is_file():
            raise FileNotFoundError(
                f"no {name!r} table for tenant {tenant!r}, dataset version {version!r} at {path}: materialize it first"
            )
        return pd.read_parquet(path)

    def exists(self, tenant: str, version: str, name: str) -> bool:
        return self.table_path(tenant, version, name).is_file()

    def where(self, tenant: str, version: str, name: str) -> str:
        return str(self.table_path(tenant, version, name))

    def write_text(self, tenant: str, version: str, filename: str, text: str) -> Path:
        """Write a file of the partition once: when it exists already (another writer was first), it is kept,
        as DatabaseStore keeps the first manifest. The caller reads it back to see whose it is."""
        path = self.partition_dir(tenant, version) / filename
        create_text_once(path, text)
        return path

    def read_text(self, tenant: str, version: str, filename: str) -> str | None:
        path = self.partition_dir(tenant, version) / filename
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def text_location(self, tenant: str, version: str, filename: str) -> str:
        return str(self.partition_dir(tenant, version) / filename)

    def manifest_texts(self, tenant: str) -> dict[str, str]:
        """{version: manifest text} of the tenant's versions whose golden-set table is beside its manifest."""
        found = {}
        for manifest in sorted(self.tenant_dir(tenant).glob(f"*/{MANIFEST_FILE}")):
            if (manifest.parent / "golden_set.parquet").is_file():
                found[manifest.parent.name] = manifest.read_text(encoding="utf-8")
        return found

    @contextmanager
    def version_lock(self, tenant: str, version: str) -> Iterator[None]:
        """Hold the version's lock: reentrant in one thread, exclusive across threads and processes (flock,
        released by the kernel when a holder dies)."""
        with _file_lock(self.partition_dir(tenant, version) / VERSION_LOCK_FILE, f"{tenant}/{version}"):
            yield

    # --- a tenant's own tables ---

    def tenant_table_path(self, tenant: str, name: str) -> Path:
        return self.tenant_dir(tenant) / TENANT_TABLES_FOLDER / f"{validate_name('table', name)}.parquet"

    def write_tenant_table(self, tenant: str, name: str, frame: pd.DataFrame) -> Path:
        return atomic_write_parquet(self.tenant_table_path(tenant, name), frame)

    def read_tenant_table(self, tenant: str, name: str) -> pd.DataFrame | None:
        path = self.tenant_table_path(tenant, name)
        return pd.read_parquet(path) if path.is_file() else None

    @contextmanager
    def tenant_table_lock(self, tenant: str, name: str) -> Iterator[None]:
        with _file_lock(self.tenant_table_path(tenant, name).with_suffix(".lock"), f"{tenant}'s {name}"):
            yield

    # --- an audit's tables: one folder per commit and run ---

    def write_audit_table(
        self, tenant: str, version: str, commit: str, run_id: str, name: str, frame: pd.DataFrame
    ) -> Path:
        return atomic_write_parquet(self.audit_dir(tenant, version, commit, run_id) / f"{name}.parquet", frame)

    def report_location(self, tenant: str, version: str, commit: str, run_id: str) -> PurePath:
        return self.audit_dir(tenant, version, commit, run_id)

    def write_report(
        self, tenant: str, version: str, commit: str, run_id: str, report: StoredReport, parameters: dict
    ) -> None:
        """The Markdown and HTML files, each written then renamed (the parameters are in the run's config)."""
        folder = self.audit_dir(tenant, version, commit, run_id)
        atomic_write_text(folder / REPORT_FILES["html"], report.html)
        atomic_write_text(folder / REPORT_FILES["markdown"], report.markdown)

    def read_report(self, tenant: str, version: str, run_id: str) -> StoredReport | None:
        """A run's rendered report (its Markdown and HTML files), whatever its commit; None when it wrote none."""
        folder = self.find_audit_dir(tenant, version, run_id)
        paths = {kind: folder / name for kind, name in REPORT_FILES.items()} if folder is not None else {}
        if not paths or not paths["markdown"].is_file():
            return None
        html = paths["html"].read_text(encoding="utf-8") if paths["html"].is_file() else ""
        return StoredReport("", {}, paths["markdown"].read_text(encoding="utf-8"), html)

    def latest_reports(self, tenant: str, version: str, limit: int) -> list[AuditReport]:
        """The version's `limit` latest reports, newest first: the report tables under the tenant's own folder,
        ordered by when each was written (its file's time; the run id breaks a tie)."""
        written = []
        for path in self.audits_dir(tenant, version).glob(f"{COMMIT_PREFIX}*/{RUN_PREFIX}*/{REPORT_TABLE}.parquet"):
            try:
                written.append((path.stat().st_mtime_ns, path.parent.name, path))
            except FileNotFoundError:  # an audit pruned while we looked
                continue
        reports = []
        for mtime_ns, run_folder, path in sorted(written, reverse=True)[: max(0, limit)]:
            try:
                rows = history_rows(path)
            except FileNotFoundError:
                continue
            reports.append(
                AuditReport(
                    commit=commit_of_folder(path.parent.parent),
                    run_id=run_folder.removeprefix(RUN_PREFIX),
                    written_at=datetime.fromtimestamp(mtime_ns / 1e9, timezone.utc).isoformat(),
                    verdict=str(rows[0].get("verdict_overall") or "") if rows else "",
                    rows=rows,
                    location=path.parent,
                )
            )
        return reports

    def locations(self, tenant: str, version: str, run_id: str) -> list[str]:
        """Where a run's tables are, for a person to find them: the version's folder and the run's audit folder."""
        folder = self.partition_dir(tenant, version)
        lines = [f"tables for {tenant}/{version}: {folder}"]
        lines += [f"  {path.name}" for path in sorted(folder.glob("*.parquet"))]
        audit = self.find_audit_dir(tenant, version, run_id)
        if audit is not None:
            lines.append(f"audit of commit {commit_of_folder(audit.parent)} (run {run_id}): {audit}")
            lines += [f"  {path.name}" for path in sorted(audit.glob("*.parquet"))]
        return lines

    def read_audit_table(self, tenant: str, version: str, run_id: str, name: str) -> pd.DataFrame | None:
        """The table a run wrote, whatever its commit (run ids are unique); None when it wrote none."""
        folder = self.find_audit_dir(tenant, version, run_id)
        path = folder / f"{name}.parquet" if folder is not None else None
        return pd.read_parquet(path) if path is not None and path.is_file() else None

    # --- outputs submitted before a run: one file per submission, under its commit ---

    def write_submission(self, tenant: str, version: str, commit: str, submission_id: str, text: str) -> Path:
        folder = self.submissions_dir(tenant, version) / (COMMIT_PREFIX + quote(validate_commit(commit), safe=""))
        return atomic_write_text(folder / f"{validate_submission_id(submission_id)}.jsonl", text)

    def read_submission(self, tenant: str, version: str, submission_id: str) -> str | None:
        """A submission's text, whatever its commit (ids are unique); None when this version has none by that id."""
        name = f"{validate_submission_id(submission_id)}.jsonl"
        found = sorted(self.submissions_dir(tenant, version).glob(f"{COMMIT_PREFIX}*/{name}"))
        return found[0].read_text(encoding="utf-8") if found else None


@contextmanager
def _file_lock(path: Path, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=VERSION_LOCK_TIMEOUT_S, is_singleton=True)
    try:
        lock.acquire()
    except Timeout:
        raise TimeoutError(
            f"{what} stayed locked by another run for {VERSION_LOCK_TIMEOUT_S:.0f} s ({path}): re-run when it has finished"
        ) from None
    try:
        yield
    finally:
        lock.release()
