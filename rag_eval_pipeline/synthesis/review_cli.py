"""`rag-eval diff` and `rag-eval review export|import`: golden-set versions and their human review.

A review never changes the version it reviews (published golden sets are immutable): the import
writes a new dataset version with the reviewed golden set, the upstream tables of the reviewed
version (so the audit job can run on it), and a manifest naming its parent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from rag_eval_pipeline import settings
from rag_eval_pipeline.command_errors import exit_2_on_bad_input
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.evaluation.tabular import write_table
from rag_eval_pipeline.instance import local_instance
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.synthesis.review import apply_review, judge_verifier, read_sheet, review_sheet, write_sheet
from rag_eval_pipeline.synthesis.versions import MANIFEST_FILE, Manifest, diff_summary, diff_versions, publish, read_manifest
from rag_eval_pipeline.core.warehouse import Warehouse

# Copied from the reviewed version so the audit job (and its lineage) can run on the new one.
UPSTREAM_TABLES = ("raw_documents", "document_chunks", "chunk_clusters", "synthesis_plan", "rejected_documents")


def add_commands(subparsers) -> None:
    """Add `diff` and `review` to the `rag-eval` subcommands."""
    diff = subparsers.add_parser("diff", help="what changed in the golden set between two dataset versions")
    diff.add_argument("--tenant", required=True)
    diff.add_argument("--from", dest="from_version", required=True, help="the older dataset version")
    diff.add_argument("--to", dest="to_version", required=True, help="the newer dataset version")
    diff.add_argument("--out", type=Path, help="also write the diff: .md, .csv, .jsonl or .parquet")
    diff.set_defaults(handler=exit_2_on_bad_input(_diff))

    review = subparsers.add_parser("review", help="export a golden set for human review, or import the decisions")
    actions = review.add_subparsers(dest="review_action", metavar="{export,import}", required=True)

    export = actions.add_parser("export", help="write a review sheet (.csv or .jsonl) for a golden set")
    export.add_argument("--tenant", required=True)
    export.add_argument("--version", required=True, help="the dataset version to review")
    export.add_argument("--out", required=True, type=Path, help=".csv or .jsonl")
    export.set_defaults(handler=exit_2_on_bad_input(_export))

    imports = actions.add_parser("import", help="apply a filled-in review sheet as a new dataset version")
    imports.add_argument("--tenant", required=True)
    imports.add_argument("--version", required=True, help="the reviewed dataset version")
    imports.add_argument("--file", required=True, type=Path, help="the filled-in sheet, .csv or .jsonl")
    imports.add_argument("--new-version", required=True, help="the dataset version the review makes")
    imports.set_defaults(handler=exit_2_on_bad_input(_import))


def _warehouse() -> Warehouse:
    return Warehouse(settings.warehouse_root())


# ---- diff ------------------------------------------------------------------------------------


def _diff(args) -> int:
    warehouse = _warehouse()
    tenant, old_version, new_version = args.tenant, args.from_version, args.to_version
    old, new = (warehouse.read(tenant, v, "golden_set") for v in (old_version, new_version))
    diff = diff_versions(old, new)
    counts = diff_summary(diff)
    print(f"golden set of {tenant}: {old_version} ({_describe(warehouse, tenant, old_version)}) -> "
          f"{new_version} ({_describe(warehouse, tenant, new_version)})")
    print(", ".join(f"{n} {change}" for change, n in counts.items()))
    if len(diff):
        print()
        print(_markdown(diff))
    if args.out:
        _write_diff(diff, args.out, f"Golden set diff: {tenant} {old_version} -> {new_version}")
        print(f"diff written to {args.out}")
    return 0


def _describe(warehouse: Warehouse, tenant: str, version: str) -> str:
    manifest = read_manifest(warehouse, tenant, version)
    if manifest is None:
        return "not published"
    return f"{manifest.n_items} items, hash {manifest.content_hash[:12]}, {manifest.source}"


def _markdown(frame: pd.DataFrame) -> str:
    """A Markdown table whose cells cannot break it: no pipes, no line breaks."""
    cells = frame.map(lambda value: str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " "))
    return cells.to_markdown(index=False)


def _write_diff(diff: pd.DataFrame, path: Path, title: str) -> None:
    if path.suffix.lower() == ".md":
        counts = ", ".join(f"{n} {change}" for change, n in diff_summary(diff).items())
        path.write_text(f"# {title}\n\n{counts}\n\n{_markdown(diff) if len(diff) else ''}\n", encoding="utf-8")
    else:
        write_table(diff, path)


# ---- review export ---------------------------------------------------------------------------


def _export(args) -> int:
    golden = _warehouse().read(args.tenant, args.version, "golden_set")
    path = write_sheet(review_sheet(golden), args.out)
    print(f"{len(golden)} items of {args.tenant}/{args.version} written to {path}")
    print("fill in decision (accept, reject or edit; blank leaves an item unreviewed), edited_question and/or "
          "edited_ground_truth for an edit, and reviewer_note; then run `rag-eval review import`")
    return 0


# ---- review import ---------------------------------------------------------------------------


def _import(args) -> int:
    tenant = validate_name("tenant", args.tenant)
    version = validate_name("dataset version", args.version)
    new_version = validate_name("dataset version", args.new_version)
    if new_version == version:
        raise ValueError("--new-version must differ from --version: a published golden set never changes")
    warehouse = _warehouse()
    _refuse_existing(warehouse, tenant, new_version)

    # Everything that can fail on bad input happens before anything is written.
    golden = warehouse.read(tenant, version, "golden_set")
    verify = judge_verifier(OfflineJudge(Embedder()))  # the support check needs no embeddings
    result = apply_review(golden, read_sheet(args.file), verify)

    register_partition(local_instance(), tenant, new_version)
    copied = [name for name in UPSTREAM_TABLES if _copy_table(warehouse, tenant, version, new_version, name)]
    warehouse.write(tenant, new_version, "golden_set", result.golden)
    warehouse.write(tenant, new_version, "rejected_qa", _all_rejected(warehouse, tenant, version, result.rejected))
    manifest = publish(warehouse, tenant, new_version, result.golden, source=f"review of {version}", parent_version=version)
    _print_import(tenant, version, result, manifest, warehouse.partition_dir(tenant, new_version), copied)
    return 0


def _refuse_existing(warehouse: Warehouse, tenant: str, version: str) -> None:
    manifest = read_manifest(warehouse, tenant, version)
    if manifest is not None:
        raise ValueError(
            f"{tenant}/{version} already has a published golden set (hash {manifest.content_hash[:12]}, "
            f"{manifest.published_at}); choose another --new-version"
        )
    if warehouse.exists(tenant, version, "golden_set"):
        raise ValueError(f"{tenant}/{version} already has a golden set; choose another --new-version")


def _copy_table(warehouse: Warehouse, tenant: str, source: str, target: str, name: str) -> bool:
    """Copy one table if the source version has it; write then rename, like the warehouse does."""
    origin = warehouse.table_path(tenant, source, name)
    if not origin.is_file():
        return False
    destination = warehouse.table_path(tenant, target, name)
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_suffix(".parquet.partial")
    shutil.copyfile(origin, partial)
    partial.replace(destination)
    return True


def _all_rejected(warehouse: Warehouse, tenant: str, version: str, review_rejected: pd.DataFrame) -> pd.DataFrame:
    """The reviewed version's rejected items (kept for the audit trail) plus the review's."""
    if not warehouse.exists(tenant, version, "rejected_qa"):
        return review_rejected
    earlier = warehouse.read(tenant, version, "rejected_qa")
    frames = [frame for frame in (earlier, review_rejected) if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else review_rejected


def _print_import(tenant, version, result, manifest: Manifest, folder: Path, copied: list[str]) -> None:
    s = result.summary
    print(f"review of {tenant}/{version} -> {tenant}/{manifest.dataset_version}: {s['accepted']} accepted, "
          f"{s['edited']} edited, {s['rejected']} rejected, {s['edit_rejected']} edits failed verification, "
          f"{s['unreviewed']} unreviewed")
    for reason in result.rejected["reason"]:
        if not str(reason).startswith("rejected by reviewer"):
            print(f"  {reason}")
    print(f"golden set: {manifest.n_items} items, content hash {manifest.content_hash[:12]}, "
          f"published {manifest.published_at} ({manifest.source})")
    print(f"written to {folder}: golden_set, rejected_qa, {MANIFEST_FILE}"
          + (f"; copied from {version}: {', '.join(copied)}" if copied else ""))
    print(f"audit it: rag-eval run --tenant {tenant} --version {manifest.dataset_version} --job audit")
