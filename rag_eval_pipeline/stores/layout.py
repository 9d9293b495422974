"""What the stores keep and under which names: the tables of a version, the audit tables of a run, the files.

Shared by every store (local, results database, object store) and by the code that reads and writes
through them, so a table or file has one name wherever it lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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
