"""The regression report of one audited run: its table, Markdown, HTML and summary, and its files.

Dagster-free: the regression_report asset builds it from the comparison it made and writes it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

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


@dataclass(frozen=True)
class Outcome:
    """The candidate against its baseline, and whether it becomes the baseline."""

    baseline_commit: str  # "" when there is no baseline yet
    baseline_source: str
    comparison: Comparison
    analysis: Analysis
    promotion: str | None  # why the candidate becomes the baseline, or None

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

    def stored(self) -> StoredReport:
        return StoredReport(self.summary["verdict"], self.summary, self.markdown, self.html)


def build_report(audit: Audit, outcome: Outcome) -> Report:
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
    return Report(
        table=table,
        markdown=render_markdown(comparison, title, details, outcome.analysis, outcome.verdict),
        html=render_html(comparison, title, details, outcome.analysis, outcome.verdict),
        markdown_path=markdown_path,
        html_path=html_path,
        summary=summary,
    )


def judges_of(scores: pd.DataFrame) -> str:
    """The judge names on the score rows, for the report's header."""
    distinct = sorted(set(scores["judge"].dropna().astype(str)))
    return ", ".join(distinct) if distinct else "unknown"
