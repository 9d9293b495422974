"""What the stores keep and under which names: the tables of a version, the audit tables of a run, the files.

Shared by every store (local, results database, object store) and by the code that reads and writes
through them, so a table or file has one name wherever it lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from urllib.parse import unquote

import pandas as pd

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


REPORT_TABLE = "regression_report"  # the report's table: a row per metric, what the history reads
# How many of a version's latest reports one read may ask for (`rag-eval history --limit`).
MAX_REPORTS = 10_000
# The report table's columns the history reads (reporting/history.py); a report stored before one existed lacks it.
HISTORY_COLUMNS = (
    "metric",
    "candidate_mean",
    "baseline_mean",
    "delta",
    "tolerance",
    "coverage",
    "verdict",
    "verdict_overall",
    "baseline_commit",
    "baseline_source",
    "judge",
    "judge_calls",
    "prompt_tokens",
    "completion_tokens",
    "run_judge_calls",
    "run_prompt_tokens",
    "run_completion_tokens",
)


@dataclass(frozen=True)
class AuditReport:
    """One audit's stored report as the history reads it (ResultsStore.latest_reports)."""

    commit: str
    run_id: str
    written_at: str  # when the report was stored, ISO 8601 in UTC
    verdict: str  # the overall verdict
    rows: list[dict] | None  # the report table's rows (HISTORY_COLUMNS only); None when the run stored none
    location: PurePath  # the store's report_location: the audit folder, or a name for a database row


def history_rows(source) -> list[dict]:
    """The HISTORY_COLUMNS of a stored report table (a Parquet file's path, or its bytes), one dict per metric.

    Read with pyarrow, not pandas: a history reads a hundred of these, and a DataFrame per table would cost
    ten times as long. A missing value is None."""
    import io

    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    names = set(parquet.schema_arrow.names)
    return parquet.read(columns=[column for column in HISTORY_COLUMNS if column in names]).to_pylist()


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
