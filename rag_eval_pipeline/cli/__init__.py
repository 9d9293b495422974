"""`rag-eval`: register tenants and versions, run the lineage and the demo, gate candidates, score
and synthesize files, review golden sets, manage baselines, draw a tenant's metric history, clear runs
whose process is gone, and serve the gate service (and its tokens).

Each command imports what it needs when it runs, so `rag-eval --help` starts without Dagster,
torch or pandas. Bad input ends in one line, `error: ...`, and exit 2 (see errors.py).
"""

from __future__ import annotations

import click

from rag_eval_pipeline.cli import (
    baseline,
    dataset,
    db,
    errors,
    files,
    gate,
    history,
    lineage,
    metrics,
    prune,
    questions,
    review,
    runs,
    service,
)
from rag_eval_pipeline.cli.calibrate import calibrate
from rag_eval_pipeline.cli.signals import stay_stoppable


@click.group(
    name="rag-eval",
    help=(__doc__ or "").split("\n\n")[0],
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def rag_eval() -> None:
    pass


for command in (
    lineage.register,
    lineage.run,
    lineage.demo,
    files.evaluate,
    files.synthesize,
    calibrate,
    metrics.metrics,
    gate.gate,
    questions.questions,
    review.diff,
    review.review,
    dataset.dataset,
    baseline.baseline,
    history.history,
    db.db,
    runs.runs,
    prune.prune,
    service.serve,
    service.token,
):
    rag_eval.add_command(command)


def main(argv: list[str] | None = None) -> int:
    """Run `rag-eval` with argv (default: the process's arguments); the exit status."""
    stay_stoppable()
    return errors.run(rag_eval, argv)
