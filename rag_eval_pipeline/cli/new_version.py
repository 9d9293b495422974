"""A golden-set version that no synthesis run made: what `rag-eval review import` and `rag-eval dataset import` share.

Both write a new dataset version of the local warehouse outside Dagster, and publish it only when its
golden set passes the expectations suite the synthesis job runs. The name must be free: a published
version is refused, and so is a folder holding another run's tables; the leftovers of an import that
stopped before its manifest (its marker says they are an import's) are replaced. Imports into one new
version take turns (a file lock) from that check to the manifest, so only one of them publishes; the
manifest, written last, is what makes the version. The partition is registered in the Dagster instance,
so the UI and `rag-eval run` know it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import settings

if TYPE_CHECKING:  # imported when a command runs: `rag-eval --help` loads no Dagster
    from dagster import DagsterInstance

# Copied from the reviewed version so the audit job (and its lineage) can run on the new one.
UPSTREAM_TABLES = (
    "raw_documents",
    "rejected_documents",
    "document_chunks",
    "chunk_clusters",
    "generation_failures",
    "generation_plan",
    "synthesis_plan",
)
# Every table an import writes into its new version (a dataset import: golden_set, rejected_qa,
# document_chunks and synthesis_plan).
IMPORTED_TABLES = (*UPSTREAM_TABLES, "golden_set", "rejected_qa")
# Written first by an import into its new version: tables there without a manifest are then the leftovers
# of an import that did not finish (not of a synthesis), which the next import may replace. The name is
# the one review imports have always written, so their leftovers stay replaceable.
IMPORT_MARKER = "review_import.json"
LOCK_TIMEOUT_S = 300.0  # an import holds its new version's lock for seconds; a longer wait is a stuck one


def local_warehouse(command: str):
    """The local warehouse, for what only it supports yet (an import writes a version's tables beside it)."""
    from rag_eval_pipeline.stores.local import Warehouse

    if settings().production.enabled:
        raise BadInput(
            f"rag-eval {command} writes a new version beside the local warehouse's tables; "
            "production mode keeps them in Postgres and the object store, where import is not "
            "supported yet: unset RAG_EVAL_DATABASE_URL to import into a local warehouse"
        )
    return Warehouse(settings().warehouse_root)


def refuse_taken(warehouse, tenant: str, version: str) -> bool:
    """Refuse a new version that is published, or that holds another run's tables; True when it holds
    the leftovers of an import that did not finish (no manifest: no version, so the name is free)."""
    from rag_eval_pipeline.synthesis.versions import read_manifest

    manifest = read_manifest(warehouse, tenant, version)
    if manifest is not None:
        raise BadInput(
            f"{tenant}/{version} already has a published golden set (hash {manifest.content_hash[:12]}, "
            f"{manifest.published_at}); choose another --new-version"
        )
    folder = warehouse.partition_dir(tenant, version)
    if (folder / IMPORT_MARKER).is_file():
        return True
    tables = sorted(path.stem for path in folder.glob("*.parquet"))
    if tables:
        raise BadInput(
            f"{tenant}/{version} holds the tables of an unpublished run ({', '.join(tables[:4])}"
            f"{', ...' if len(tables) > 4 else ''}), not of an import: choose another --new-version, or "
            f"delete {folder} if they are not needed"
        )
    return False


def check_expectations(golden, chunk_ids: set[str], expected: set[str], what: str, extra_columns=()) -> None:
    """Run the synthesis job's expectations suite on `golden` (`what` names it): BadInput naming what failed."""
    from rag_eval_pipeline.synthesis.expectations import check_golden_set

    report = check_golden_set(golden, chunk_ids, expected, extra_columns=tuple(extra_columns))
    if not report.success:
        failed = "; ".join(f"{f.table}.{f.column or '(table)'} {f.expectation}: {f.detail}" for f in report.failures)
        raise BadInput(
            f"{what} fails the expectations suite the synthesis runs ({len(report.failures)} of "
            f"{len(report.results)} expectations), so nothing was published: {failed}"
        )


@contextmanager
def writing_new_version(warehouse, tenant: str, version: str, marker: dict) -> Iterator[DagsterInstance]:
    """Under the new version's lock: the name checked free again (an unfinished import's leftovers
    removed), the marker written, the partition registered; yields the Dagster instance. The caller writes
    the tables and publishes before the block ends."""
    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.partitions import register_partition

    with import_lock(warehouse, tenant, version):
        # Again under the lock: another import may have published this version meanwhile.
        if refuse_taken(warehouse, tenant, version):
            remove_leftovers(warehouse, tenant, version)
        write_marker(warehouse, tenant, version, marker)
        instance = local_instance(settings().dagster_home)
        register_partition(instance, tenant, version)
        yield instance


@contextmanager
def import_lock(warehouse, tenant: str, version: str) -> Iterator[None]:
    """One import at a time into a new version: from the check that it is free to its manifest."""
    from filelock import FileLock, Timeout

    path = warehouse.tenant_dir(tenant) / f".{version}.review-import.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(path), timeout=LOCK_TIMEOUT_S):
            yield
    except Timeout:
        raise BadInput(
            f"another import into {tenant}/{version} has held it for {LOCK_TIMEOUT_S:.0f} s; "
            "try again when it has finished"
        ) from None


def write_marker(warehouse, tenant: str, version: str, record: dict) -> None:
    """The marker that says the version's tables are an import's: what it imports, when, which process."""
    from datetime import datetime, timezone

    from rag_eval_pipeline.core.files import atomic_write_text

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record = {**record, "started_at": started, "pid": os.getpid()}
    atomic_write_text(warehouse.partition_dir(tenant, version) / IMPORT_MARKER, json.dumps(record) + "\n")


def remove_leftovers(warehouse, tenant: str, version: str) -> None:
    """The tables an unfinished import wrote (its marker says they are its own): this import writes its own."""
    for name in IMPORTED_TABLES:
        warehouse.table_path(tenant, version, name).unlink(missing_ok=True)
    click.echo(f"note: replacing what an unfinished import into {tenant}/{version} left (it stopped before publishing)")
