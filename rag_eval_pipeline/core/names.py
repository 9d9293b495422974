"""The names a user chooses (tenant, dataset version, commit) and the checks that keep them safe as
folder names, partition keys and run tags."""

from __future__ import annotations

import re
from urllib.parse import quote

COMMIT_TAG = "rag_eval/commit"  # run tag naming the audited commit, set by the CLI and the sensors
RESULTS_TAG, RESULTS_IN_DATABASE = "rag_eval/results", "database"  # a run whose submitter keeps results in Postgres
MAX_COMMIT_CHARS = 100
MAX_COMMIT_FOLDER_CHARS = 200  # percent-encoded, as a folder name; file systems allow 255 bytes
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME_PATTERN = re.compile(r"^[a-z0-9_-]{1,63}$")


class PartitionNameError(ValueError):
    """A tenant or dataset version name that is malformed or not registered."""


def validate_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise PartitionNameError(
            f"invalid {kind} name {name!r}: use 1 to 63 characters among lowercase letters, digits, '-' and '_'"
        )
    return name


def validate_commit(commit: str) -> str:
    """A candidate's commit: 1 to 100 printable characters without spaces (a sha, a tag, a branch@sha)."""
    if (
        not isinstance(commit, str)
        or not 1 <= len(commit) <= MAX_COMMIT_CHARS
        or not commit.isprintable()
        or any(c.isspace() for c in commit)
    ):
        shown = (
            commit
            if not isinstance(commit, str) or len(commit) <= 40
            else f"{commit[:40]}... ({len(commit)} characters)"
        )
        raise ValueError(f"invalid commit {shown!r}: use 1 to {MAX_COMMIT_CHARS} printable characters without spaces")
    if len(quote(commit, safe="")) > MAX_COMMIT_FOLDER_CHARS:
        raise ValueError(
            f"invalid commit {commit[:40]!r}...: too long once encoded as a folder name; use a shorter one"
        )
    return commit


def validate_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise ValueError(f"invalid run id {run_id!r}")
    return run_id
