"""Precomputed outputs submitted to the tenant's results store before their audit runs.

The run's config names a submission by its id (`CandidateSpec("submitted_outputs", id)`), never the
answers themselves, so the Dagster instance's records hold no tenant's answers and a worker on another
machine reads them from the store of the run's own tenant and version. Each submission gets a fresh id
(uuid4 hex) under its commit: two gates of one commit never share one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rag_eval_pipeline.core.names import validate_commit, validate_name
from rag_eval_pipeline.evaluation.candidates import CandidateError, CandidateSpec, outputs_text, records_text
from rag_eval_pipeline.stores.protocols import ResultsStore


def submit_outputs(
    store: ResultsStore, tenant: str, version: str, commit: str, outputs: str | Iterable[Mapping[str, Any]]
) -> CandidateSpec:
    """Store outputs received in memory (JSON Lines text, or the records) for an audit of commit on
    tenant/version; the candidate to audit them as. CandidateError (one line) for outputs an outputs file
    could not hold (not JSON objects, no usable record, over the size limit); ValueError for a bad name."""
    return _submit(store, tenant, version, commit, records_text(outputs))


def submit_outputs_file(store: ResultsStore, tenant: str, version: str, commit: str, path: Path | str) -> CandidateSpec:
    """submit_outputs for a JSONL file on this machine's disk, read and checked as `outputs_text` does."""
    return _submit(store, tenant, version, commit, outputs_text(path))


def submitted(store: ResultsStore, tenant: str, version: str, commit: str, candidate: CandidateSpec) -> CandidateSpec:
    """The candidate a run can be configured with: an outputs file submitted first, any other as it is."""
    if candidate.kind != "outputs_file":
        return candidate
    return submit_outputs_file(store, tenant, version, commit, candidate.value)


def read_submitted(store: ResultsStore, tenant: str, version: str, candidate: CandidateSpec) -> str:
    """The submitted outputs a candidate names, from tenant/version's own store; CandidateError when that
    store has none by its id (submitted for another tenant or version, or removed by `rag-eval prune`)."""
    if candidate.kind != "submitted_outputs":
        raise CandidateError(f"candidate {candidate} is not submitted outputs")
    text = store.read_submission(tenant, version, candidate.value)
    if text is None:
        raise CandidateError(
            f"no submitted outputs {candidate.value} for {tenant}/{version}: submit the outputs for this "
            "tenant and version before the run (they may also have been pruned)"
        )
    return text


def _submit(store: ResultsStore, tenant: str, version: str, commit: str, text: str) -> CandidateSpec:
    validate_name("tenant", tenant)
    validate_name("dataset version", version)
    validate_commit(commit)
    submission_id = uuid.uuid4().hex
    store.write_submission(tenant, version, commit, submission_id, text)
    return CandidateSpec("submitted_outputs", submission_id)
