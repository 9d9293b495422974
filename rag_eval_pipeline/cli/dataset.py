"""`rag-eval dataset import|export`: golden sets and audits in the file formats of RAGAS and DeepEval.

`import` publishes a RAGAS dataset or testset, or DeepEval goldens, as a new golden-set version of a
tenant, the way `rag-eval review import` publishes a reviewed one (cli/new_version.py): every ground
truth checked against its gold contexts by the offline support check (unless --no-verify), the items
that fail kept in rejected_qa with their reason, the golden set published only when it passes the
synthesis job's expectations suite, with a document_chunks table of the imported contexts for the
audit's reference candidate to retrieve over. `export` writes a published golden set, or one audit's
answered items (question, retrieved contexts, answer, reference), in one of those formats; a CSV's cells
that a spreadsheet would run as formulas are marked as text, and it says how many.
The mapping is synthesis/interop.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import results_store

if TYPE_CHECKING:  # imported when a command runs: `rag-eval --help` loads no pandas
    import pandas as pd

FORMAT_NAMES = ("ragas", "ragas-testset", "deepeval")  # synthesis/interop.py FORMATS, without importing pandas
MAX_REJECTIONS_SHOWN = 10
TABLES = ("golden_set", "rejected_qa", "document_chunks", "synthesis_plan")  # what an import writes


@click.group(help="golden sets and audits as RAGAS or DeepEval files: import as a new version, export")
def dataset() -> None:
    pass


@dataset.command(name="import", help="publish a RAGAS dataset or testset, or DeepEval goldens, as a new version")
@click.option("--tenant", required=True)
@click.option(
    "--file",
    "path",
    required=True,
    type=click.Path(path_type=Path),
    help="RAGAS: .jsonl or .csv with user_input; DeepEval: a .json array of goldens with input",
)
@click.option(
    "--format", "format_name", type=click.Choice(FORMAT_NAMES), help="default: told by the extension and columns"
)
@click.option("--new-version", required=True, help="the dataset version the import makes")
@click.option("--no-verify", is_flag=True, help="publish the ground truths as given (the manifest says so)")
def import_(tenant: str, path: Path, format_name: str | None, new_version: str, no_verify: bool) -> int:
    from rag_eval_pipeline.cli.new_version import local_warehouse, refuse_taken
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.synthesis.interop import import_golden_set, read_peer_file

    tenant, new_version = validate_name("tenant", tenant), validate_name("dataset version", new_version)
    warehouse = local_warehouse("dataset import")
    refuse_taken(warehouse, tenant, new_version)
    # Everything that can fail on bad input happens before anything is written.
    peer = read_peer_file(path, format_name)
    imported = import_golden_set(peer, None if no_verify else _verifier())
    _check(imported, f"the golden set imported from {path}")
    return _publish(warehouse, tenant, new_version, peer, imported)


def _verifier():
    """The offline support check the review import runs: every ground-truth statement in the gold contexts."""
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.synthesis.review import judge_verifier

    return judge_verifier(OfflineJudge(Embedder()))  # the support check needs no embeddings


def _check(imported, what: str) -> None:
    """The synthesis job's expectations suite: a type with at least 3 items in the file must keep one."""
    from rag_eval_pipeline.cli.new_version import check_expectations
    from rag_eval_pipeline.synthesis.checks import expected_types

    chunk_ids = set(imported.chunks["chunk_id"].astype(str))
    check_expectations(imported.golden, chunk_ids, expected_types(imported.plan), what)


def _publish(warehouse, tenant: str, version: str, peer, imported) -> int:
    from rag_eval_pipeline.cli.new_version import writing_new_version
    from rag_eval_pipeline.synthesis.records import record_imported_version
    from rag_eval_pipeline.synthesis.versions import publish

    tables: dict[str, pd.DataFrame] = dict(
        zip(TABLES, (imported.golden, imported.rejected, imported.chunks, imported.plan))
    )
    source = f"import of {peer.path.name} ({peer.format})" + (
        "" if imported.verified else ", not verified (--no-verify)"
    )
    with writing_new_version(
        warehouse, tenant, version, {"import_of": peer.path.name, "format": peer.format}
    ) as instance:
        for name, frame in tables.items():
            warehouse.write(tenant, version, name, frame)
        manifest = publish(warehouse, tenant, version, imported.golden, source=source)
    record_imported_version(instance, tenant, version, tables, f"{peer.format} file {peer.path.name} imported")
    _print_import(peer, imported, manifest, warehouse.partition_dir(tenant, version))
    return 0


def _print_import(peer, imported, manifest, folder: Path) -> None:
    from rag_eval_pipeline.synthesis.versions import MANIFEST_FILE

    rejected = imported.rejected
    stages = ", ".join(f"{stage} {n}" for stage, n in rejected["stage"].value_counts().items())
    click.echo(
        f"{peer.path} ({peer.format}, {len(peer.rows)} rows) -> {manifest.tenant}/{manifest.dataset_version}: "
        f"{len(imported.golden)} items kept, {len(rejected)} rejected" + (f" ({stages})" if stages else "")
    )
    for reason in rejected["reason"].head(MAX_REJECTIONS_SHOWN):
        click.echo(f"  {reason}")
    if len(rejected) > MAX_REJECTIONS_SHOWN:
        click.echo(f"  and {len(rejected) - MAX_REJECTIONS_SHOWN} more, in rejected_qa")
    if not imported.verified:
        click.echo("note: the ground truths were not checked against their gold contexts (--no-verify)")
    click.echo(
        f"golden set: {manifest.n_items} items, content hash {manifest.content_hash[:12]}, "
        f"published {manifest.published_at} ({manifest.source})"
    )
    click.echo(f"written to {folder}: {', '.join(TABLES)}, {MANIFEST_FILE}")
    click.echo(f"audit it: rag-eval run --tenant {manifest.tenant} --version {manifest.dataset_version} --job audit")


@dataset.command(name="export", help="write a published golden set, or an audit's rows, as a RAGAS or DeepEval file")
@click.option("--tenant", required=True)
@click.option("--version", required=True, help="the dataset version (that the audit ran on)")
@click.option("--format", "format_name", required=True, type=click.Choice(FORMAT_NAMES))
@click.option("--audit", "run_id", help="an audit's run id: its answered items instead of the golden set")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="ragas, ragas-testset: .jsonl or .csv; deepeval: .json",
)
def export(tenant: str, version: str, format_name: str, run_id: str | None, out: Path) -> int:
    from rag_eval_pipeline.core.files import check_writable
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.synthesis.interop import check_out_path, golden_records, write_records

    tenant, version = validate_name("tenant", tenant), validate_name("dataset version", version)
    if run_id is not None and format_name == "ragas-testset":
        raise BadInput("a RAGAS testset holds no answers: export an audit with --format ragas or deepeval")
    check_out_path(out, format_name)
    check_writable(out)
    store = results_store()
    golden = _published_golden_set(store, tenant, version)
    if run_id is None:
        written = write_records(golden_records(golden, format_name), out, format_name)
        click.echo(
            f"{len(golden)} items of the golden set of {tenant}/{version} written to {written.path} ({format_name})"
        )
        _note_marked(written.marked)
        return 0
    return _export_audit(store, tenant, version, run_id, golden, format_name, out)


def _published_golden_set(store, tenant: str, version: str):
    from rag_eval_pipeline.synthesis.versions import require_published

    golden = store.read(tenant, version, "golden_set")
    require_published(store, tenant, version, golden)
    return golden


def _export_audit(store, tenant: str, version: str, run_id: str, golden, format_name: str, out: Path) -> int:
    from rag_eval_pipeline.core.names import validate_run_id
    from rag_eval_pipeline.evaluation.audit_review import audited_items
    from rag_eval_pipeline.synthesis.interop import evaluation_records, write_records

    answered = audited_items(store, tenant, version, validate_run_id(run_id))
    if answered is None:
        raise BadInput(
            f"{tenant}/{version} has no audit of run id {run_id!r}: `rag-eval gate` and `rag-eval run --job audit` "
            "print the run id of each audit"
        )
    if not answered:
        raise BadInput(f"the candidate answered no item in audit {run_id}: nothing to export")
    items = [audited.item for audited in answered.values()]
    written = write_records(evaluation_records(items, golden, format_name), out, format_name)
    left_out = len(store.read_audit_table(tenant, version, run_id, "candidate_outputs")) - len(items)
    click.echo(
        f"{len(items)} answered items of audit {run_id} ({tenant}/{version}) written to {written.path} ({format_name})"
    )
    _note_marked(written.marked)
    if left_out:
        click.echo(f"note: {left_out} items the candidate failed on are left out: they have no answer")
    return 0


def _note_marked(marked: int) -> None:
    """How many CSV cells carry the spreadsheet's text mark: they read differently from what RAGAS reads."""
    if not marked:
        return
    cells = (
        "1 cell that a spreadsheet would run as a formula is"
        if marked == 1
        else f"{marked} cells that a spreadsheet would run as a formula are"
    )
    click.echo(
        f"note: {cells} written after a ' (its text mark); `rag-eval dataset import` takes it off, "
        "other readers keep it: .jsonl keeps every text exactly"
    )
