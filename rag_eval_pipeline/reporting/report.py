"""The regression report of one audited run: its table, Markdown, HTML and summary, and its files.

Dagster-free: the regression_report asset builds it from the comparison it made and writes it here. Beside
the comparison, the report carries what the judging cost (reporting/cost.py): calls and tokens per metric
and for the run, in its table and in a section of its own, with the money where the price table prices the
judge's model; and `trends`, the per-metric numbers as flat numeric metadata the Dagster UI plots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath

import pandas as pd
from pandas.api.extensions import ExtensionArray

from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline.reporting.compare import BASELINE_PROPOSED, NO_BASELINE, NO_BASELINE_SET, Analysis, Comparison
from rag_eval_pipeline.reporting.render import render_html, render_markdown
from rag_eval_pipeline.stores.layout import REPORT_FILES, StoredReport

MARKDOWN_FILE, HTML_FILE = REPORT_FILES["markdown"], REPORT_FILES["html"]


@dataclass(frozen=True)
class Audit:
    """Which run of which candidate the report is about, and where its store keeps it."""

    tenant: str
    version: str
    commit: str
    run_id: str
    folder: PurePath  # the run's audit folder (a name for messages when the store is a database)
    judge: str  # the judge(s) that scored the candidate
    trace_url: str = ""  # Phoenix's base URL (RAG_EVAL_PHOENIX_URL): the worst items' traces become links


@dataclass(frozen=True)
class Outcome:
    """The candidate against its baseline, and whether it becomes the baseline."""

    baseline_commit: str  # "" when there is no baseline yet
    baseline_source: str
    comparison: Comparison
    analysis: Analysis
    promotion: str | None  # why the candidate becomes the baseline, or None
    tokens: cost.RunTokens | None = None  # what the judging took; None: not recorded

    @property
    def verdict(self) -> str:
        """The comparison's verdict; without a baseline, whether this candidate became it."""
        if self.comparison.verdict != NO_BASELINE:
            return self.comparison.verdict
        return BASELINE_PROPOSED if self.promotion else NO_BASELINE_SET


@dataclass(frozen=True)
class Report:
    table: pd.DataFrame  # one row per metric, with the overall verdict and the baseline on each
    markdown: str
    html: str
    markdown_path: PurePath
    html_path: PurePath
    summary: dict[str, str]  # the headline figures, as plain strings (asset metadata, logs)
    trends: dict[str, float | int] = field(default_factory=dict)  # numeric per-metric figures (asset metadata)

    def stored(self) -> StoredReport:
        return StoredReport(self.summary["verdict"], self.summary, self.markdown, self.html)


def build_report(audit: Audit, outcome: Outcome, prices: cost.PriceTable | None = None) -> Report:
    """prices: the price table (settings `judge.price_table`) the report's cost is computed with."""
    prices = prices or {}
    comparison, promoted = outcome.comparison, outcome.promotion or ""
    baseline = outcome.baseline_commit or "none"
    markdown_path, html_path = audit.folder / MARKDOWN_FILE, audit.folder / HTML_FILE
    title = f"Regression report: {audit.tenant} / {audit.version} / commit {audit.commit}"
    details = {
        "candidate commit": audit.commit,
        "run": audit.run_id,
        "baseline commit": baseline,
        "baseline": outcome.baseline_source,
        "promoted to baseline": promoted or "no",
        "judge": audit.judge,
        "HTML report": str(html_path),
        "Markdown report": str(markdown_path),
    }
    table = comparison.table.assign(
        verdict_overall=outcome.verdict,
        commit=audit.commit,
        baseline_commit=baseline,
        baseline_source=outcome.baseline_source,
        promoted_to_baseline=promoted,
        judge=audit.judge,
        **_token_columns(comparison.table["metric"], outcome.tokens),
    )
    summary = {
        "commit": audit.commit,
        "verdict": outcome.verdict,
        "failing_metrics": ", ".join(comparison.failing_metrics) or "none",
        "baseline": f"{baseline} ({outcome.baseline_source})",
        "promoted_to_baseline": promoted or "no",
        "stage_summary": outcome.analysis.stage_summary,
        "report_path": str(markdown_path),
        "report_html_path": str(html_path),
    }
    tokens = token_section(outcome.tokens, list(comparison.table["metric"]), audit.judge, prices)
    return Report(
        table=table,
        markdown=render_markdown(
            comparison, title, details, outcome.analysis, outcome.verdict, tokens, audit.trace_url
        ),
        html=render_html(comparison, title, details, outcome.analysis, outcome.verdict, tokens, audit.trace_url),
        markdown_path=markdown_path,
        html_path=html_path,
        summary=summary,
        trends=report_trends(table, outcome.tokens, audit.judge, prices),
    )


def _token_columns(metrics: pd.Series, tokens: cost.RunTokens | None) -> dict[str, ExtensionArray]:
    """The report table's token columns: per metric, then the run's on every row; <NA> when not recorded."""
    if tokens is None:
        return {
            name: pd.array([None] * len(metrics), dtype="Int64") for name in (*cost.METRIC_COLUMNS, *cost.RUN_COLUMNS)
        }
    counts = [tokens.per_metric.get(str(metric), cost.TokenCount()) for metric in metrics]
    total = tokens.total
    return {
        "judge_calls": pd.array([c.calls for c in counts], dtype="Int64"),
        "prompt_tokens": pd.array([c.prompt_tokens for c in counts], dtype="Int64"),
        "completion_tokens": pd.array([c.completion_tokens for c in counts], dtype="Int64"),
        "run_judge_calls": pd.array([total.calls] * len(counts), dtype="Int64"),
        "run_prompt_tokens": pd.array([total.prompt_tokens] * len(counts), dtype="Int64"),
        "run_completion_tokens": pd.array([total.completion_tokens] * len(counts), dtype="Int64"),
    }


def token_section(
    tokens: cost.RunTokens | None, metrics: list[str], judge: str, prices: cost.PriceTable
) -> dict[str, object]:
    """The report's "Judge calls, tokens and cost" section: a row per metric, the re-scoring, the run."""
    if tokens is None:
        return {"rows": [], "note": cost.NOT_RECORDED_NOTE}

    def row(label: str, count: cost.TokenCount) -> list[str]:
        money = cost.cost(count, judge, prices)
        return [label, f"{count.calls:,}", f"{count.prompt_tokens:,}", f"{count.completion_tokens:,}", _money(money)]

    rows = [row(metric, tokens.per_metric.get(metric, cost.TokenCount())) for metric in metrics]
    if tokens.other.calls or tokens.other.tokens:
        rows.append(row("(calls serving no scored metric)", tokens.other))
    if tokens.rescoring.calls or tokens.rescoring.tokens:
        rows.append(row("(re-scoring the baseline)", tokens.rescoring))
    rows.append(row("run total", tokens.total))
    return {"rows": rows, "note": f"{cost.cost_note(judge, prices)}; {cost.SPLIT_NOTE}"}


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_trends(
    table: pd.DataFrame, tokens: cost.RunTokens | None, judge: str, prices: cost.PriceTable
) -> dict[str, float | int]:
    """`mean/<metric>` (the candidate's mean as the report compares it), `delta/<metric>`, `coverage/<metric>`,
    and the run's judge tokens (and cost, when priced): each a number, or left out when there is none."""
    trends: dict[str, float | int] = {}
    for row in table.to_dict("records"):
        for prefix, column in (("mean/", "candidate_mean"), ("delta/", "delta"), ("coverage/", "coverage")):
            if not _missing(row[column]):
                trends[f"{prefix}{row['metric']}"] = float(row[column])
    if tokens is not None:
        total = tokens.total
        trends["judge_calls"], trends["judge_tokens"] = total.calls, total.tokens
        money = cost.cost(total, judge, prices)
        if money is not None:
            trends["judge_cost"] = money
    return trends


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))  # type: ignore[arg-type]


def judges_of(scores: pd.DataFrame) -> str:
    """The judge names on the score rows, for the report's header."""
    distinct = sorted(set(scores["judge"].dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
