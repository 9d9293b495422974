"""`rag-eval calibrate`: how far the judge agrees with human labels, per metric, with 95% intervals.

The labels come from a file (`--labels`: RAGAS's columns and `<metric>_label` columns) or from the tenant's
stored labels (`--tenant`); with both, the file's labels are added to the tenant's first, and the judge is
calibrated on all of them. With `--tenant` the calibration is stored under the judge's identity (its name,
k and metric set), where the gate and the report find it. Everything is checked before anything is stored.
"""

from __future__ import annotations

from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import (
    JudgeOptions,
    checked_metrics,
    judge_options,
    metrics_option,
    progress_logging,
    results_store,
)

MAX_K = 10_000  # a cut-off beyond any retriever's ranked list; larger numbers overflow the stored integer
COLUMNS = (  # header, summary field, width
    ("accuracy@best [95% CI] (threshold)", "accuracy_best", 36),
    ("accuracy@0.5 [95% CI]", "accuracy_at_half", 24),
    ("kappa [95% CI]", "kappa", 25),
    ("ROC-AUC [95% CI]", "roc_auc", 24),
    ("pairwise [95% CI]", "pairwise", 24),
)


@click.command(help="measure the judge against human labels (a labels file, or the tenant's stored labels)")
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(path_type=Path),
    help=".jsonl, .csv or .parquet: RAGAS's columns, a <metric>_label column per labelled metric "
    "(0/1 or graded in [0, 1]; empty: not labelled), optional pair_id",
)
@click.option("--tenant", help="add the file's labels to the tenant's, calibrate on all of them, store the result")
@metrics_option
@click.option("--k", type=int, default=5, show_default=True, help="cut-off for hit rate@k and MRR, at least 1")
@judge_options()
def calibrate(labels_path: Path | None, tenant: str | None, metrics: str | None, k: int, judge: JudgeOptions) -> int:
    from rag_eval_pipeline.cli.files import build_judge
    from rag_eval_pipeline.core import tracing
    from rag_eval_pipeline.evaluation import calibration as cal
    from rag_eval_pipeline.evaluation.labels import read_labels

    chosen = _checked_arguments(labels_path, tenant, metrics, k, judge)
    labelled = cal.read_labels_file(labels_path) if labels_path else []
    _check_label_metrics(labelled, chosen)
    store = results_store() if tenant else None
    if store is not None and tenant and not labelled and cal.tenant_labels(store, tenant, chosen).empty:
        from rag_eval_pipeline.evaluation.user_metrics import is_judged

        judged = ", ".join(m for m in chosen if is_judged(m)) or "no judged metric"
        raise BadInput(f"tenant {tenant} has no labels of the metrics scored ({judged}): give --labels FILE")
    # A tenant's labels are its data: the judge's spans over them go to its project, never the shared one.
    with progress_logging(), tracing.tenant_scope(tenant or ""):
        scorer, embedder = build_judge(judge)  # an unusable judge setting fails here, before anything is stored
        identity = cal.judge_identity(scorer, k, chosen)
        if store is None or tenant is None:
            calibration = cal.calibrate(labelled, scorer, embedder, identity)
        else:
            rows = _label_rows(labelled, labels_path)
            calibration = cal.calibrate_tenant(store, tenant, scorer, embedder, identity, rows)
            if rows and labels_path is not None:
                stored = len(read_labels(store, tenant))
                click.echo(f"{len(rows)} labels of {labels_path.name} added to {tenant}'s labels ({stored} in all)")
    _print(calibration, tenant)
    return 0


def _checked_arguments(
    labels_path: Path | None, tenant: str | None, metrics: str | None, k: int, judge: JudgeOptions
) -> tuple[str, ...]:
    """The metric set; BadInput for any argument that cannot work."""
    from rag_eval_pipeline.core.names import validate_name
    from rag_eval_pipeline.evaluation.tabular import check_format

    if labels_path is None and not tenant:
        raise BadInput("give --labels FILE, --tenant T (its stored labels), or both")
    if tenant:
        validate_name("tenant", tenant)
    chosen = checked_metrics(metrics)
    for option, value in (("--k", k), ("--concurrency", judge.concurrency)):
        if value < 1:
            raise BadInput(f"{option} must be at least 1, got {value}")
    if k > MAX_K:
        raise BadInput(f"--k must be at most {MAX_K}, got {k}")
    if labels_path is not None:
        check_format(labels_path, "labels")
    return chosen


def _check_label_metrics(labelled, chosen: tuple[str, ...]) -> None:
    outside = sorted({metric for entry in labelled for metric in entry.labels} - set(chosen))
    if outside:
        raise BadInput(
            f"the labels file labels {', '.join(outside)}, not among --metrics ({', '.join(chosen)}): "
            "add them to --metrics or drop their columns"
        )


def _label_rows(labelled, labels_path: Path | None) -> list[dict]:
    """The labels file's labels as the tenant's label rows (stored with the calibration, never before it)."""
    from rag_eval_pipeline.evaluation.labels import label_rows

    source = labels_path.name if labels_path is not None else ""
    return [row for e in labelled for row in label_rows(e.item, e.labels, source, pair_id=e.pair_id)]


def _print(calibration, tenant: str | None) -> None:
    from rag_eval_pipeline.evaluation.calibration import as_number, figure_text

    header = (f"{'metric':<22}{'n':>5}{'measured':>10}  " + "".join(f"{h:<{w}}" for h, _, w in COLUMNS)).rstrip()
    lines, notes = [header, "-" * len(header)], []
    for row in calibration.summary.to_dict("records"):
        cells = []
        for _, name, width in COLUMNS:
            text = "n/a" if as_number(row[name]) is None else figure_text(row, name)
            if name == "accuracy_best" and text != "n/a":
                threshold = as_number(row["best_threshold"])
                text += " (calling every item bad)" if threshold is None else f" ({threshold:.3f})"
            cells.append(f"{text:<{width}}")
        lines.append((f"{row['metric']:<22}{row['n_labels']:>5}{row['n_measured']:>10}  " + "".join(cells)).rstrip())
        notes += _notes(row)
    click.echo("\n".join(lines + notes))
    click.echo(str(calibration.identity))
    if tenant:
        click.echo(f"stored as {tenant}'s {calibration.identity.table} and {calibration.identity.items_table}")
    else:
        click.echo("not stored (no --tenant)")


def _notes(row: dict) -> list[str]:
    """What the table leaves out: unmeasured items and their reasons, undefined figures, graded labels."""
    metric, notes = row["metric"], []
    if row["n_unmeasured"]:
        notes.append(
            f"{metric}: n_labels {row['n_labels']}, measured {row['n_measured']}, "
            f"{row['n_unmeasured']} unmeasured ({row['unmeasured_reasons']})"
        )
    for _, name, _ in COLUMNS:
        if row[f"{name}_note"]:
            notes.append(f"{metric}: {name}: {row[f'{name}_note']}")
    if row["graded"]:
        notes.append(f"{metric}: graded labels are read as good at >= 0.5 for every figure")
    return notes
