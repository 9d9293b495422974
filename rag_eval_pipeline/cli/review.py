"""`rag-eval diff` and `rag-eval review export|import`: golden-set versions and their human review.

A review never changes the version it reviews (published golden sets are immutable): the import
writes a new dataset version with the reviewed golden set, the upstream tables of the reviewed
version (so the audit job can run on it), and a manifest naming its parent; it records a
materialization of each table in the Dagster instance, so the UI shows the new partition as built.
"""

from __future__ import annotations

from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import results_store, settings

# Copied from the reviewed version so the audit job (and its lineage) can run on the new one.
UPSTREAM_TABLES = (
    "raw_documents", "rejected_documents", "document_chunks", "chunk_clusters", "generation_failures", "generation_plan",
    "synthesis_plan",
)


def _warehouse():
    """Where the golden sets are: the local warehouse, or the results database in production mode."""
    return results_store()


def _local_warehouse():
    """The local warehouse, for what only it supports yet (an import copies the version's other tables)."""
    from rag_eval_pipeline.core.warehouse import Warehouse

    if settings().production.enabled:
        raise BadInput("rag-eval review import writes a new version beside the local warehouse's tables; "
                       "production mode keeps them in Postgres and the object store, where import is not "
                       "supported yet: unset RAG_EVAL_DATABASE_URL to import into a local warehouse")
    return Warehouse(settings().warehouse_root)


# ---- diff ------------------------------------------------------------------------------------


@click.command(help="what changed in the golden set between two dataset versions")
@click.option("--tenant", required=True)
@click.option("--from", "from_version", required=True, help="the older dataset version")
@click.option("--to", "to_version", required=True, help="the newer dataset version")
@click.option("--out", type=click.Path(path_type=Path), help="also write the diff: .md, .csv, .jsonl or .parquet")
def diff(tenant: str, from_version: str, to_version: str, out: Path | None) -> int:
    from rag_eval_pipeline.synthesis.versions import diff_summary, diff_versions

    warehouse = _warehouse()
    old, new = (warehouse.read(tenant, v, "golden_set") for v in (from_version, to_version))
    changes = diff_versions(old, new)
    click.echo(f"golden set of {tenant}: {from_version} ({_describe(warehouse, tenant, from_version)}) -> "
               f"{to_version} ({_describe(warehouse, tenant, to_version)})")
    click.echo(", ".join(f"{n} {change}" for change, n in diff_summary(changes).items()))
    if len(changes):
        click.echo()
        click.echo(_markdown(changes))
    if out:
        _write_diff(changes, out, f"Golden set diff: {tenant} {from_version} -> {to_version}")
        click.echo(f"diff written to {out}")
    return 0


def _describe(warehouse, tenant: str, version: str) -> str:
    from rag_eval_pipeline.synthesis.versions import read_manifest

    manifest = read_manifest(warehouse, tenant, version)
    if manifest is None:
        return "not published"
    return f"{manifest.n_items} items, hash {manifest.content_hash[:12]}, {manifest.source}"


def _markdown(frame) -> str:
    """A Markdown table whose cells cannot break it: no pipes, no line breaks."""
    cells = frame.map(lambda value: str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " "))
    return cells.to_markdown(index=False)


def _write_diff(changes, path: Path, title: str) -> None:
    from rag_eval_pipeline.core.files import atomic_write_text
    from rag_eval_pipeline.evaluation.tabular import write_table
    from rag_eval_pipeline.synthesis.versions import diff_summary

    if path.suffix.lower() == ".md":
        counts = ", ".join(f"{n} {change}" for change, n in diff_summary(changes).items())
        atomic_write_text(path, f"# {title}\n\n{counts}\n\n{_markdown(changes) if len(changes) else ''}\n")
    else:
        write_table(changes, path)


# ---- review export | import ------------------------------------------------------------------


@click.group(help="export a golden set for human review, or import the decisions", no_args_is_help=False)
def review() -> None:
    pass


@review.command(name="export", help="write a review sheet (.csv or .jsonl) for a golden set")
@click.option("--tenant", required=True)
@click.option("--version", required=True, help="the dataset version to review")
@click.option("--out", required=True, type=click.Path(path_type=Path), help=".csv or .jsonl")
def export(tenant: str, version: str, out: Path) -> int:
    from rag_eval_pipeline.synthesis.review import review_sheet, write_sheet

    golden = _warehouse().read(tenant, version, "golden_set")
    path = write_sheet(review_sheet(golden), out)
    click.echo(f"{len(golden)} items of {tenant}/{version} written to {path}")
    click.echo("fill in decision (accept, reject or edit; blank leaves an item unreviewed), edited_question and/or "
               "edited_ground_truth for an edit, and reviewer_note; then run `rag-eval review import`")
    return 0


@review.command(name="import", help="apply a filled-in review sheet as a new dataset version")
@click.option("--tenant", required=True)
@click.option("--version", required=True, help="the reviewed dataset version")
@click.option("--file", "sheet_path", required=True, type=click.Path(path_type=Path),
              help="the filled-in sheet, .csv or .jsonl")
@click.option("--new-version", required=True, help="the dataset version the review makes")
def import_(tenant: str, version: str, sheet_path: Path, new_version: str) -> int:
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.instance import local_instance
    from rag_eval_pipeline.partitions import register_partition
    from rag_eval_pipeline.synthesis.records import record_imported_version
    from rag_eval_pipeline.synthesis.review import apply_review, judge_verifier, read_sheet
    from rag_eval_pipeline.synthesis.versions import publish

    tenant = validate_name("tenant", tenant)
    version = validate_name("dataset version", version)
    new_version = validate_name("dataset version", new_version)
    if new_version == version:
        raise BadInput("--new-version must differ from --version: a published golden set never changes")
    warehouse = _local_warehouse()
    _refuse_existing(warehouse, tenant, new_version)

    # Everything that can fail on bad input happens before anything is written.
    golden = warehouse.read(tenant, version, "golden_set")
    verify = judge_verifier(OfflineJudge(Embedder()))  # the support check needs no embeddings
    result = apply_review(golden, read_sheet(sheet_path), verify)

    instance = local_instance(settings().dagster_home)
    register_partition(instance, tenant, new_version)
    copied = [name for name in UPSTREAM_TABLES if _copy_table(warehouse, tenant, version, new_version, name)]
    rejected = _all_rejected(warehouse, tenant, version, result.rejected)
    warehouse.write(tenant, new_version, "golden_set", result.golden)
    warehouse.write(tenant, new_version, "rejected_qa", rejected)
    manifest = publish(warehouse, tenant, new_version, result.golden, source=f"review of {version}", parent_version=version)
    written = {name: warehouse.read(tenant, new_version, name) for name in copied}
    record_imported_version(instance, tenant, new_version, {**written, "golden_set": result.golden, "rejected_qa": rejected},
                            f"review of {tenant}/{version} imported from {sheet_path.name}")
    _print_import(tenant, version, result, manifest, warehouse.partition_dir(tenant, new_version), copied)
    return 0


def _refuse_existing(warehouse, tenant: str, version: str) -> None:
    from rag_eval_pipeline.synthesis.versions import read_manifest

    manifest = read_manifest(warehouse, tenant, version)
    if manifest is not None:
        raise BadInput(
            f"{tenant}/{version} already has a published golden set (hash {manifest.content_hash[:12]}, "
            f"{manifest.published_at}); choose another --new-version"
        )
    if warehouse.exists(tenant, version, "golden_set"):
        raise BadInput(f"{tenant}/{version} already has a golden set; choose another --new-version")


def _copy_table(warehouse, tenant: str, source: str, target: str, name: str) -> bool:
    """Copy one table if the source version has it (write then rename, like the warehouse)."""
    origin = warehouse.table_path(tenant, source, name)
    if not origin.is_file():
        return False
    from rag_eval_pipeline.core.files import atomic_copy

    atomic_copy(origin, warehouse.table_path(tenant, target, name))
    return True


def _all_rejected(warehouse, tenant: str, version: str, review_rejected):
    """The reviewed version's rejected items (kept for the audit trail) plus the review's."""
    import pandas as pd

    if not warehouse.exists(tenant, version, "rejected_qa"):
        return review_rejected
    earlier = warehouse.read(tenant, version, "rejected_qa")
    frames = [frame for frame in (earlier, review_rejected) if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else review_rejected


def _print_import(tenant, version, result, manifest, folder: Path, copied: list[str]) -> None:
    from rag_eval_pipeline.synthesis.versions import MANIFEST_FILE

    s = result.summary
    click.echo(f"review of {tenant}/{version} -> {tenant}/{manifest.dataset_version}: {s['accepted']} accepted, "
               f"{s['edited']} edited, {s['rejected']} rejected, {s['edit_rejected']} edits failed verification, "
               f"{s['unreviewed']} unreviewed")
    for reason in result.rejected["reason"]:
        if not str(reason).startswith("rejected by reviewer"):
            click.echo(f"  {reason}")
    click.echo(f"golden set: {manifest.n_items} items, content hash {manifest.content_hash[:12]}, "
               f"published {manifest.published_at} ({manifest.source})")
    click.echo(f"written to {folder}: golden_set, rejected_qa, {MANIFEST_FILE}"
               + (f"; copied from {version}: {', '.join(copied)}" if copied else ""))
    click.echo(f"audit it: rag-eval run --tenant {tenant} --version {manifest.dataset_version} --job audit")
