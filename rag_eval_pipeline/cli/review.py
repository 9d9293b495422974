"""`rag-eval diff` and `rag-eval review export|import`: golden-set versions and their human review.

A review never changes the version it reviews (published golden sets are immutable): the import
writes a new dataset version with the reviewed golden set, the upstream tables of the reviewed
version (so the audit job can run on it), and a manifest naming its parent; it records a
materialization of each table in the Dagster instance, so the UI shows the new partition as built.

Only a published version can be reviewed, and the reviewed golden set is published only when it
passes the expectations suite the synthesis job runs. The manifest, written last, is what makes the
new version: an import stopped before it leaves no version, and the next import to that name
replaces what it left. Imports to one new version take turns (a lock), so only one publishes.

`review export --audit RUN_ID` writes instead a sheet of the items one audit judged, for a person to
label (evaluation/audit_review.py); `review import` tells that sheet by its columns and stores its labels
as the tenant's (evaluation/labels.py), for `rag-eval calibrate`; it makes no version.
"""

from __future__ import annotations

from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.new_version import UPSTREAM_TABLES
from rag_eval_pipeline.cli.options import results_store, settings


def _warehouse():
    """Where the golden sets are: the local warehouse, or the results database in production mode."""
    return results_store()


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
    click.echo(
        f"golden set of {tenant}: {from_version} ({_describe(warehouse, tenant, from_version)}) -> "
        f"{to_version} ({_describe(warehouse, tenant, to_version)})"
    )
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
    from rag_eval_pipeline.synthesis.review import as_spreadsheet_text
    from rag_eval_pipeline.synthesis.versions import diff_summary

    if path.suffix.lower() == ".md":
        counts = ", ".join(f"{n} {change}" for change, n in diff_summary(changes).items())
        atomic_write_text(path, f"# {title}\n\n{counts}\n\n{_markdown(changes) if len(changes) else ''}\n")
    elif path.suffix.lower() == ".csv":  # opened in a spreadsheet: a tenant's text must not run as a formula
        write_table(changes.map(lambda value: as_spreadsheet_text(value) if isinstance(value, str) else value), path)
    else:
        write_table(changes, path)


# ---- review export | import ------------------------------------------------------------------


@click.group(help="human review: of a golden set (a new version) or of an audit (labels)", no_args_is_help=False)
def review() -> None:
    pass


@review.command(name="export", help="write a review sheet (.csv or .jsonl) of a golden set, or of an audit to label")
@click.option("--tenant", required=True)
@click.option("--version", required=True, help="the dataset version to review, or that the audit ran on")
@click.option("--audit", "run_id", help="an audit's run id: a sheet of the items it judged, to label")
@click.option("--out", required=True, type=click.Path(path_type=Path), help=".csv or .jsonl")
def export(tenant: str, version: str, run_id: str | None, out: Path) -> int:
    if settings().service.remote:
        from rag_eval_pipeline.cli.remote import finish, service

        sheet = f"sheet{out.suffix.lower()}"
        params = {"format": out.suffix.lower().lstrip("."), "name": str(out), **({"audit": run_id} if run_id else {})}
        return finish(service().get(f"/v1/tenants/{tenant}/reviews/{version}", params=params), {sheet: out})
    if run_id is not None:
        return _export_audit(tenant, version, run_id, out)
    from rag_eval_pipeline.synthesis.review import review_sheet, write_sheet
    from rag_eval_pipeline.synthesis.versions import read_manifest

    warehouse = _warehouse()
    golden = warehouse.read(tenant, version, "golden_set")
    path = write_sheet(review_sheet(golden), out)
    click.echo(f"{len(golden)} items of {tenant}/{version} written to {path}")
    if read_manifest(warehouse, tenant, version) is None:
        click.echo(
            f"note: {tenant}/{version} is not published (its synthesis did not finish or failed its "
            "expectations suite): `rag-eval review import` will refuse a review of it",
            err=True,
        )
    click.echo(
        "fill in decision (accept, reject or edit; blank leaves an item unreviewed), edited_question and/or "
        "edited_ground_truth for an edit, and reviewer_note; then run `rag-eval review import`"
    )
    return 0


def _export_audit(tenant: str, version: str, run_id: str, out: Path) -> int:
    """A sheet of the items one audit judged, with empty columns for a person's labels."""
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.evaluation.audit_review import audit_sheet
    from rag_eval_pipeline.synthesis.review import write_sheet

    tenant, version = validate_name("tenant", tenant), validate_name("dataset version", version)
    sheet = audit_sheet(_warehouse(), tenant, version, run_id)
    path = write_sheet(sheet.frame, out)
    click.echo(
        f"{len(sheet.frame)} items of audit {run_id} ({tenant}/{version}, commit {sheet.commit}) written to {path}"
    )
    if sheet.left_out:
        click.echo(f"note: {sheet.left_out} items the candidate failed on are left out: the judge scored nothing there")
    click.echo(
        "label what you read: faithful (1/0: every statement of the answer supported by the contexts?), correct "
        "(1/0: agrees with the ground truth?), relevant (1/0: addresses the question?), relevant_contexts (the "
        "numbers of the relevant contexts, e.g. 1,3, or none), labeler_note; blank cells say nothing; then run "
        f"`rag-eval review import --tenant {tenant} --file {path}`"
    )
    return 0


@review.command(
    name="import",
    help="apply a filled-in review sheet as a new dataset version, or store a filled-in audit sheet's labels",
)
@click.option("--tenant", required=True)
@click.option("--version", help="the reviewed dataset version (a golden-set review sheet only)")
@click.option(
    "--file", "sheet_path", required=True, type=click.Path(path_type=Path), help="the filled-in sheet, .csv or .jsonl"
)
@click.option("--new-version", help="the dataset version the review makes (a golden-set review sheet only)")
def import_(tenant: str, version: str | None, sheet_path: Path, new_version: str | None) -> int:
    if settings().service.remote:
        from rag_eval_pipeline.cli.remote import finish, service

        try:
            sheet = sheet_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise BadInput(f"cannot read --file {sheet_path}: {error}") from None
        versions = {"version": version, "new_version": new_version}
        body = {**{k: v for k, v in versions.items() if v is not None}, "sheet": sheet, "sheet_name": str(sheet_path)}
        return finish(service().post(f"/v1/tenants/{tenant}/reviews", body))
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.evaluation.audit_review import is_audit_sheet

    tenant = validate_name("tenant", tenant)
    version = None if version is None else validate_name("dataset version", version)
    new_version = None if new_version is None else validate_name("dataset version", new_version)
    if version is not None and new_version == version:
        raise BadInput("--new-version must differ from --version: a published golden set never changes")
    sheet = _read_review_sheet(sheet_path)
    if is_audit_sheet(sheet.columns):
        if version is not None or new_version is not None:
            raise BadInput(
                f"{sheet_path} is an audit sheet: its labels make no dataset version; leave out --version and "
                "--new-version"
            )
        return _import_labels(tenant, sheet, sheet_path)
    if version is None or new_version is None:
        raise BadInput(
            f"{sheet_path} is a golden-set review sheet: its import needs --version (the reviewed version) and "
            "--new-version (the version it makes)"
        )
    return _import_review(tenant, version, new_version, sheet, sheet_path)


def _read_review_sheet(path: Path):
    """The sheet, every cell as text; one line naming the file when it cannot be read as a sheet."""
    import pandas as pd

    from rag_eval_pipeline.synthesis.review import read_sheet

    try:
        sheet = read_sheet(path)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise BadInput(f"cannot read --file {path} as a review sheet: {error}") from None
    if sheet.empty:  # no row (or no column): an empty file is never a review of every item as unreviewed
        raise BadInput(f"--file {path} holds no rows: fill in a sheet written by `rag-eval review export`")
    return sheet


def _import_labels(tenant: str, sheet, sheet_path: Path) -> int:
    """Store an audit sheet's labels as the tenant's, every row checked before any is stored."""
    from rag_eval_pipeline.evaluation.audit_review import read_audit_labels
    from rag_eval_pipeline.evaluation.labels import store_labels

    store = _warehouse()
    labels = read_audit_labels(store, tenant, sheet)
    skipped = f"{labels.skipped} rows without a label skipped"
    if not labels.rows:
        click.echo(f"no row of {sheet_path} has a label ({skipped}): nothing stored")
        return 0
    stored = store_labels(store, tenant, labels.rows)
    per_metric = ", ".join(f"{metric} {n}" for metric, n in labels.labelled.items())
    click.echo(f"{labels.items} items of {tenant} labelled from {sheet_path} ({per_metric}); {skipped}")
    click.echo(f"{tenant} has {len(stored)} labels of {stored['label_key'].nunique()} items")
    click.echo(f"next: rag-eval calibrate --tenant {tenant}")
    return 0


def _import_review(tenant: str, version: str, new_version: str, sheet, sheet_path: Path) -> int:
    """Apply a golden-set review sheet as a new published version (the module docstring says how)."""
    from rag_eval_pipeline.cli.new_version import local_warehouse, refuse_taken, writing_new_version
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.synthesis.records import record_imported_version
    from rag_eval_pipeline.synthesis.review import apply_review, judge_verifier
    from rag_eval_pipeline.synthesis.versions import publish

    warehouse = local_warehouse("review import")
    refuse_taken(warehouse, tenant, new_version)

    # Everything that can fail on bad input happens before anything is written.
    golden = warehouse.read(tenant, version, "golden_set")
    _require_reviewable(warehouse, tenant, version, golden)
    verify = judge_verifier(OfflineJudge(Embedder()))  # the support check needs no embeddings
    result = apply_review(golden, sheet, verify)
    dropped_types = _check_expectations(warehouse, tenant, version, golden, result)

    marker = {"review_of": version, "sheet": sheet_path.name}
    with writing_new_version(warehouse, tenant, new_version, marker) as instance:
        copied = [name for name in UPSTREAM_TABLES if _copy_table(warehouse, tenant, version, new_version, name)]
        rejected = _all_rejected(warehouse, tenant, version, result.rejected)
        warehouse.write(tenant, new_version, "golden_set", result.golden)
        warehouse.write(tenant, new_version, "rejected_qa", rejected)
        manifest = publish(
            warehouse, tenant, new_version, result.golden, source=f"review of {version}", parent_version=version
        )
    written = {name: warehouse.read(tenant, new_version, name) for name in copied}
    record_imported_version(
        instance,
        tenant,
        new_version,
        {**written, "golden_set": result.golden, "rejected_qa": rejected},
        f"review of {tenant}/{version} imported from {sheet_path.name}",
    )
    _print_import(
        tenant, version, result, manifest, warehouse.partition_dir(tenant, new_version), copied, dropped_types
    )
    return 0


def _require_reviewable(warehouse, tenant: str, version: str, golden) -> None:
    """Only a published golden set is reviewed: one that failed its suite must be re-synthesized, not patched."""
    from rag_eval_pipeline.synthesis.versions import content_hash, read_manifest

    manifest = read_manifest(warehouse, tenant, version)
    if manifest is None:
        raise BadInput(
            f"{tenant}/{version} is not published (its synthesis did not finish or failed its expectations "
            "suite): only a published golden set can be reviewed"
        )
    if manifest.content_hash != content_hash(golden):
        raise BadInput(
            f"the golden_set table of {tenant}/{version} does not match its published manifest "
            f"(content hash {manifest.content_hash[:12]}): refusing to review it"
        )


def _check_expectations(warehouse, tenant: str, version: str, golden, result) -> set[str]:
    """Run the synthesis job's expectations suite on the reviewed golden set: BadInput naming what failed.

    The reviewed version's chunks and its plan's expected types, except the types the reviewer rejected
    every item of (returned, to be reported).
    """
    from rag_eval_pipeline.cli.new_version import check_expectations
    from rag_eval_pipeline.synthesis.checks import PLAN_TABLE, expected_types
    from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS
    from rag_eval_pipeline.synthesis.review import REVIEWED_COLUMNS, types_expected_after_review

    chunk_ids = set(warehouse.read(tenant, version, "document_chunks")["chunk_id"].astype(str))
    planned = expected_types(warehouse.read(tenant, version, PLAN_TABLE))
    expected = types_expected_after_review(planned, golden, result)
    review_columns = tuple(c for c in REVIEWED_COLUMNS if c not in GOLDEN_COLUMNS)
    what = f"the reviewed golden set of {tenant}/{version}"
    check_expectations(result.golden, chunk_ids, expected, what, extra_columns=review_columns)
    return (planned & set(golden["question_type"].astype(str))) - expected


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


def _print_import(tenant, version, result, manifest, folder: Path, copied: list[str], dropped_types: set[str]) -> None:
    from rag_eval_pipeline.synthesis.versions import MANIFEST_FILE

    s = result.summary
    click.echo(
        f"review of {tenant}/{version} -> {tenant}/{manifest.dataset_version}: {s['accepted']} accepted, "
        f"{s['edited']} edited, {s['rejected']} rejected, {s['edit_rejected']} edits failed verification, "
        f"{s['unreviewed']} unreviewed"
    )
    for reason in result.rejected["reason"]:
        if not str(reason).startswith("rejected by reviewer"):
            click.echo(f"  {reason}")
    for question_type in sorted(dropped_types):
        click.echo(f"note: no {question_type} question is left: the review rejected every one")
    click.echo(
        f"golden set: {manifest.n_items} items, content hash {manifest.content_hash[:12]}, "
        f"published {manifest.published_at} ({manifest.source})"
    )
    click.echo(
        f"written to {folder}: golden_set, rejected_qa, {MANIFEST_FILE}"
        + (f"; copied from {version}: {', '.join(copied)}" if copied else "")
    )
    click.echo(f"audit it: rag-eval run --tenant {tenant} --version {manifest.dataset_version} --job audit")
