"""Parquet tables on disk, one folder per (tenant, dataset_version).

The synthesis tables of a partition live in its folder. The audit tables (a candidate's outputs, its
scores and its report) live in a folder of their own per audited commit and run,
`<tenant>/<version>/audits/commit=<commit>/run=<run_id>/`, so concurrent audits of one tenant never
read or overwrite each other's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from urllib.parse import quote, unquote

import pandas as pd
from filelock import FileLock, Timeout

from rag_eval_pipeline.core.files import atomic_write_parquet, atomic_write_text, create_text_once
from rag_eval_pipeline.core.names import validate_commit, validate_name, validate_run_id

AUDIT_TABLES = ("candidate_outputs", "metric_scores", "regression_report")
# The tables a golden set is built from, and the golden set: what a published version is made of.
SYNTHESIS_TABLES = (
    "raw_documents",
    "rejected_documents",
    "document_chunks",
    "chunk_clusters",
    "synthetic_qa",
    "generation_failures",
    "generation_plan",
    "golden_set",
    "rejected_qa",
    "synthesis_plan",
)
AUDITS_FOLDER = "audits"
COMMIT_PREFIX, RUN_PREFIX = "commit=", "run="  # the prefixes keep '.' or '..' commits from naming a parent


MANIFEST_FILE = "golden_set.manifest.json"  # written last: it makes a golden-set version visible
VERSION_LOCK_FILE = ".version.lock"  # held by every write of a version's table and by its publication
VERSION_LOCK_TIMEOUT_S = 300.0  # one table write, or one publication, holds it: seconds, not minutes
REPORT_FILES = {"markdown": "regression_report.md", "html": "regression_report.html"}
# Output metadata of an asset that stored its table itself (see regression_report): the IO manager skips it.
STORED_BY_ASSET = "stored_by_asset"


@dataclass(frozen=True)
class StoredReport:
    """A rendered regression report as a store keeps it."""

    verdict: str
    summary: dict
    markdown: str
    html: str


def commit_of_folder(folder: Path) -> str:
    return unquote(folder.name.removeprefix(COMMIT_PREFIX))


def audited_commit(tagged: str | None, *frames: pd.DataFrame) -> str:
    """The one commit these audit rows belong to; refuses rows of several commits, or of another than the run's."""
    found = sorted({str(c) for frame in frames for c in frame["commit"].dropna()})
    expected = [tagged] if tagged else found
    if len(expected) != 1 or any(c != expected[0] for c in found):
        raise ValueError(
            f"the audit rows name the commits {found or 'none'} but the run audits {tagged or 'one commit'}: "
            "refusing to publish a report that would not name the commit it scored"
        )
    return expected[0]


class Warehouse:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def tenant_dir(self, tenant: str) -> Path:
        return self.root / validate_name("tenant", tenant)

    def partition_dir(self, tenant: str, dataset_version: str) -> Path:
        return self.tenant_dir(tenant) / validate_name("dataset version", dataset_version)

    def audits_dir(self, tenant: str, dataset_version: str) -> Path:
        return self.partition_dir(tenant, dataset_version) / AUDITS_FOLDER

    def commit_dir(self, tenant: str, dataset_version: str, commit: str) -> Path:
        return self.audits_dir(tenant, dataset_version) / (COMMIT_PREFIX + quote(validate_commit(commit), safe=""))

    def audit_dir(self, tenant: str, dataset_version: str, commit: str, run_id: str) -> Path:
        """The folder of one audit: one commit, one run."""
        return self.commit_dir(tenant, dataset_version, commit) / (RUN_PREFIX + validate_run_id(run_id))

    def find_audit_dir(self, tenant: str, dataset_version: str, run_id: str) -> Path | None:
        """The audit folder a run wrote, whatever its commit (run ids are unique)."""
        pattern = f"{COMMIT_PREFIX}*/{RUN_PREFIX}{validate_run_id(run_id)}"
        found = sorted(self.audits_dir(tenant, dataset_version).glob(pattern))
        return found[0] if found else None

    def table_path(self, tenant: str, dataset_version: str, name: str) -> Path:
        return self.partition_dir(tenant, dataset_version) / f"{name}.parquet"

    def write(self, tenant: str, dataset_version: str, name: str, frame: pd.DataFrame) -> Path:
        return atomic_write_parquet(self.table_path(tenant, dataset_version, name), frame)

    def read(self, tenant: str, dataset_version: str, name: str) -> pd.DataFrame:
        path = self.table_path(tenant, dataset_version, name)
        if not path.is_file():
            raise FileNotFoundError(
                f"no {name!r} table for tenant {tenant!r}, dataset version {dataset_version!r} at {path}: "
                "materialize it first"
            )
        return pd.read_parquet(path)

    def exists(self, tenant: str, dataset_version: str, name: str) -> bool:
        return self.table_path(tenant, dataset_version, name).is_file()

    def where(self, tenant: str, dataset_version: str, name: str) -> str:
        return str(self.table_path(tenant, dataset_version, name))

    def write_text(self, tenant: str, dataset_version: str, filename: str, text: str) -> Path:
        """Write a file of the partition once: when it exists already (another writer was first), it is kept,
        as DatabaseStore keeps the first manifest. The caller reads it back to see whose it is."""
        path = self.partition_dir(tenant, dataset_version) / filename
        create_text_once(path, text)
        return path

    def read_text(self, tenant: str, dataset_version: str, filename: str) -> str | None:
        path = self.partition_dir(tenant, dataset_version) / filename
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def text_location(self, tenant: str, dataset_version: str, filename: str) -> str:
        return str(self.partition_dir(tenant, dataset_version) / filename)

    def manifest_texts(self, tenant: str) -> dict[str, str]:
        """{version: manifest text} of the tenant's versions whose golden-set table is beside its manifest."""
        found = {}
        for manifest in sorted(self.tenant_dir(tenant).glob(f"*/{MANIFEST_FILE}")):
            if (manifest.parent / "golden_set.parquet").is_file():
                found[manifest.parent.name] = manifest.read_text(encoding="utf-8")
        return found

    @contextmanager
    def version_lock(self, tenant: str, dataset_version: str) -> Iterator[None]:
        """Hold the version's lock: reentrant in one thread, exclusive across threads and processes (flock,
        released by the kernel when a holder dies)."""
        path = self.partition_dir(tenant, dataset_version) / VERSION_LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=VERSION_LOCK_TIMEOUT_S, is_singleton=True)
        try:
            lock.acquire()
        except Timeout:
            raise TimeoutError(
                f"{tenant}/{dataset_version} stayed locked by another run for "
                f"{VERSION_LOCK_TIMEOUT_S:.0f} s ({path}): re-run when it has finished"
            ) from None
        try:
            yield
        finally:
            lock.release()

    # --- an audit's tables: one folder per commit and run ---

    def write_audit_table(
        self, tenant: str, dataset_version: str, commit: str, run_id: str, name: str, frame: pd.DataFrame
    ) -> Path:
        return atomic_write_parquet(self.audit_dir(tenant, dataset_version, commit, run_id) / f"{name}.parquet", frame)

    def report_location(self, tenant: str, dataset_version: str, commit: str, run_id: str) -> PurePath:
        return self.audit_dir(tenant, dataset_version, commit, run_id)

    def write_report(
        self, tenant: str, dataset_version: str, commit: str, run_id: str, report: StoredReport, parameters: dict
    ) -> None:
        """The Markdown and HTML files, each written then renamed (the parameters are in the run's config)."""
        folder = self.audit_dir(tenant, dataset_version, commit, run_id)
        atomic_write_text(folder / REPORT_FILES["html"], report.html)
        atomic_write_text(folder / REPORT_FILES["markdown"], report.markdown)

    def read_audit_table(self, tenant: str, dataset_version: str, run_id: str, name: str) -> pd.DataFrame | None:
        """The table a run wrote, whatever its commit (run ids are unique); None when it wrote none."""
        folder = self.find_audit_dir(tenant, dataset_version, run_id)
        path = folder / f"{name}.parquet" if folder is not None else None
        return pd.read_parquet(path) if path is not None and path.is_file() else None
