"""`rag-eval metrics`: the metrics a run can score, from their registry, and a check of a team's own."""

from __future__ import annotations

import click

from rag_eval_pipeline.cli.options import checked_metrics

GATE_TOLERANCE = "the gate's"


@click.command(help="list the built-in metrics, or check and describe the metrics named (yours too)")
@click.argument("names", required=False)
def metrics(names: str | None) -> int:
    from rag_eval_pipeline.core.judging.llm_judge import calls_serving
    from rag_eval_pipeline.evaluation.user_metrics import metric_named

    rows = [
        "| metric | judged from | LLM calls | embeds | tolerance | version | what it measures |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in checked_metrics(names):  # a name that cannot be loaded is refused here, in one line
        metric = metric_named(name)
        needs = ", ".join(str(getattr(need, "text", need)) for need in metric.needs) or "chunk ids"
        rows.append(
            f"| {metric.name} | {needs} | {', '.join(calls_serving(metric.needs)) or 'none'} | "
            f"{'yes' if metric.embeds else 'no'} | "
            f"{GATE_TOLERANCE if metric.tolerance is None else format(metric.tolerance, 'g')} | "
            f"{metric.identity or 'built in'} | {metric.description} |"
        )
    click.echo("\n".join(rows))
    return 0
