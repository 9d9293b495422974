"""A tenant's history: each metric over its latest audited commits, as data and as one self-contained HTML page.

`tenant_history` reads, for one golden-set version (default: the tenant's latest published one), the
latest `limit` stored reports (ResultsStore.latest_reports: the local warehouse's tenant folder, or one
statement in the tenant's transaction of the results database) and the version's promotions
(BaselineStore.history). Each audit (a commit and a run) is a point: per metric the candidate's mean as
its report compared it, the baseline's mean, the delta, the tolerance, the coverage and the verdict; the
overall verdict (a blocked commit is one whose report blocked it); the promotions of that audit; and
what the judging took, in calls and tokens, and in money where the price table prices the judge's model
(reporting/cost.py). A commit audited twice is two points.

`render_history_html` draws it as one HTML file with inline CSS and inline SVG only (no script, no
external file), like the report: a strip of the audits (blocked ones red, promotions marked), then one
panel per metric with its line over the audits, the tolerance band around the baseline it was compared
with (below the band the metric regressed), promotions as green lines and blocked audits as red bands;
every point links to its report. Tables below say the same for people who do not read charts.
Dagster-free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline.reporting.compare import BLOCKS, PASSES, decision
from rag_eval_pipeline.reporting.report import HTML_FILE
from rag_eval_pipeline.stores.layout import MAX_REPORTS, AuditReport
from rag_eval_pipeline.stores.protocols import BaselineStore, Promotion, ResultsStore

DEFAULT_LIMIT = 100
RESCORED_MARK = "re-scored"  # in a report's baseline source when the baseline was scored again (reporting/assets.py)

Link = Callable[[str, AuditReport], str]  # (version, audit) -> its report's URL ("" when none a browser can open)


class NoHistory(ValueError):
    """Nothing to draw: no published golden set, or no stored report on the version."""


@dataclass(frozen=True)
class MetricPoint:
    """One metric of one audit, as its report compared it."""

    candidate_mean: float | None
    baseline_mean: float | None
    delta: float | None
    tolerance: float | None
    coverage: float | None
    verdict: str
    tokens: cost.TokenCount | None  # None: not recorded (a report from before tokens were counted)
    cost: float | None = None  # None: not priced, or tokens not recorded


@dataclass(frozen=True)
class Point:
    """One audit: a commit, a run, and what its report said."""

    commit: str
    run_id: str
    written_at: str  # ISO 8601, UTC
    verdict: str  # the report's overall verdict
    outcome: str  # compare.PASSES, BLOCKS or UNDECIDED
    baseline_commit: str  # "none" when there was no baseline yet
    baseline_source: str
    judge: str
    metrics: dict[str, MetricPoint]
    tokens: cost.TokenCount | None  # the run's: its scoring and any re-scoring of the baseline
    cost: float | None  # None: not priced (or tokens not recorded)
    report: str  # link to the report; "" when none a browser can open
    promotions: list[Promotion] = field(default_factory=list)  # promotions of this very audit

    @property
    def blocked(self) -> bool:
        return self.outcome == BLOCKS

    @property
    def rescored(self) -> bool:
        """The baseline it was compared with was scored again with this run's judge."""
        return RESCORED_MARK in self.baseline_source


@dataclass(frozen=True)
class History:
    tenant: str
    version: str
    limit: int
    points: list[Point]  # oldest first
    metrics: list[str]  # in the reports' order
    promotions: list[Promotion]  # every promotion of the version, oldest first
    cost_note: str

    @property
    def blocked(self) -> list[Point]:
        return [point for point in self.points if point.blocked]

    def promoted_points(self) -> list[tuple[Point, Promotion]]:
        return [(point, promotion) for point in self.points for promotion in point.promotions]

    def earlier_promotions(self) -> list[Promotion]:
        """Promotions of audits that are not among the points (older than the window, or pruned)."""
        shown = {id(promotion) for _, promotion in self.promoted_points()}
        return [promotion for promotion in self.promotions if id(promotion) not in shown]

    def as_dict(self) -> dict:
        """The history as JSON-ready data (the service's `format=json`)."""
        return {
            "tenant": self.tenant,
            "version": self.version,
            "limit": self.limit,
            "metrics": self.metrics,
            "cost_note": self.cost_note,
            "promotions": [asdict(promotion) for promotion in self.promotions],
            "points": [
                {
                    **{key: value for key, value in asdict(point).items() if key not in ("metrics", "promotions")},
                    "blocked": point.blocked,
                    "rescored": point.rescored,
                    "promoted": [promotion.reason for promotion in point.promotions],
                    "metrics": {name: asdict(metric) for name, metric in point.metrics.items()},
                }
                for point in self.points
            ],
        }


def tenant_history(
    results: ResultsStore,
    baselines: BaselineStore,
    tenant: str,
    version: str | None = None,
    limit: int = DEFAULT_LIMIT,
    prices: cost.PriceTable | None = None,
    link: Link | None = None,
) -> History:
    """The tenant's latest `limit` audits of a version (default: its latest published one), oldest first.

    link: (version, audit) -> the audit's report URL (default: the local report file's file:// URL, "" for a
    database row, which no browser opens without the gate service)
    NoHistory (a ValueError, one line) when there is no published version or no stored report on it.
    """
    from rag_eval_pipeline.synthesis.versions import latest_version

    tenant = validate_name("tenant", tenant)
    if not 1 <= limit <= MAX_REPORTS:
        raise ValueError(f"the history's limit must be 1 to {MAX_REPORTS:,} audits, got {limit}")
    version = validate_name("dataset version", version) if version else latest_version(results, tenant)
    if version is None:
        raise NoHistory(f"tenant {tenant!r} has no published golden set, so no audit to show")
    reports = results.latest_reports(tenant, version, limit)[::-1]  # oldest first
    if not reports:
        raise NoHistory(f"{tenant}/{version} has no stored report yet: gate a commit first (`rag-eval gate`)")
    prices = prices or {}
    link = link or local_report_link
    points = [_point(report, prices, link(version, report)) for report in reports]
    promotions = baselines.history(tenant, version)
    _place(promotions, points)
    metrics = list(dict.fromkeys(metric for point in points for metric in point.metrics))
    judges = [point.judge for point in points if point.judge]
    note = cost.cost_note(judges[-1], prices) if judges else "these reports recorded neither their judge nor tokens"
    return History(tenant, version, limit, points, metrics, promotions, note)


def summary_line(history: History) -> str:
    """What `rag-eval history` prints above the file's path."""
    promoted = len(history.promoted_points())
    return (
        f"metric history of {history.tenant}/{history.version}: {len(history.points)} audits, "
        f"{len(history.blocked)} blocked, {promoted} promotion{'s' if promoted != 1 else ''}, "
        f"{len(history.metrics)} metrics"
    )


def local_report_link(version: str, report: AuditReport) -> str:
    """The file:// URL of a local report's HTML file; "" for a report kept elsewhere (a database row)."""
    location = report.location
    if not isinstance(location, Path):
        return ""
    path = location / HTML_FILE
    return path.resolve().as_uri() if path.is_file() else ""


def _point(report: AuditReport, prices: cost.PriceTable, link: str) -> Point:
    rows = report.rows or []
    first = rows[0] if rows else {}
    judge = str(first.get("judge") or "")
    metrics = {str(row["metric"]): _metric_point(row, judge, prices) for row in rows}
    tokens = _run_tokens(first)
    verdict = report.verdict or str(first.get("verdict_overall") or "")
    return Point(
        commit=report.commit,
        run_id=report.run_id,
        written_at=report.written_at,
        verdict=verdict,
        outcome=decision(verdict),
        baseline_commit=str(first.get("baseline_commit") or "none"),
        baseline_source=str(first.get("baseline_source") or ""),
        judge=judge,
        metrics=metrics,
        tokens=tokens,
        cost=None if tokens is None else cost.cost(tokens, judge, prices),
        report=link,
    )


def _number(value) -> float | None:
    return None if value is None or bool(pd.isna(value)) else float(value)


def _count(row: dict, names: Iterable[str]) -> cost.TokenCount | None:
    values = [row.get(name) for name in names]
    if any(value is None or bool(pd.isna(value)) for value in values):
        return None
    return cost.TokenCount(*(int(value) for value in values))  # type: ignore[arg-type]


def _metric_point(row: dict, judge: str, prices: cost.PriceTable) -> MetricPoint:
    tokens = _count(row, cost.METRIC_COLUMNS)
    return MetricPoint(
        candidate_mean=_number(row.get("candidate_mean")),
        baseline_mean=_number(row.get("baseline_mean")),
        delta=_number(row.get("delta")),
        tolerance=_number(row.get("tolerance")),
        coverage=_number(row.get("coverage")),
        verdict=str(row.get("verdict") or ""),
        tokens=tokens,
        cost=None if tokens is None else cost.cost(tokens, judge, prices),
    )


def _run_tokens(row: dict) -> cost.TokenCount | None:
    return _count(row, cost.RUN_COLUMNS)


def _when(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _place(promotions: list[Promotion], points: list[Point]) -> None:
    """Attach each promotion to the audit it promoted: the one its run id names, else (an older history line
    without one) the commit's latest audit stored before the promotion."""
    by_run = {(point.commit, point.run_id): point for point in points}
    for promotion in promotions:
        point = by_run.get((promotion.commit, promotion.run_id)) if promotion.run_id else None
        if point is None and not promotion.run_id:
            before = [
                p
                for p in points
                if p.commit == promotion.commit and _when(p.written_at) <= _when(promotion.promoted_at)
            ]
            point = before[-1] if before else None
        if point is not None:
            point.promotions.append(promotion)


# --- the HTML page ------------------------------------------------------------------------------------------

# Geometry in SVG user units; every score is in [0, 1].
_LEFT, _RIGHT, _PANEL_H, _TOP, _PLOT_H = 150, 30, 130, 12, 96
_STRIP_H = 64
_MIN_STEP, _MAX_STEP, _PLOT_W = 6.0, 48.0, 960


def render_history_html(history: History) -> str:
    """The history as one self-contained HTML page (see the module docstring)."""
    return _TEMPLATES.get_template("history.html").render(_page(history))


def _page(history: History) -> dict:
    count = len(history.points)
    step = min(_MAX_STEP, max(_MIN_STEP, _PLOT_W / max(count - 1, 1)))
    width = _LEFT + step * max(count - 1, 0) + _RIGHT + 20
    xs = [_LEFT + 10 + step * index for index in range(count)]
    label_every = max(1, round(64 / step))  # a label every 64 units or so: they must not overlap
    return {
        "title": f"Metric history: {history.tenant} / {history.version}",
        "history": history,
        "width": round(width, 1),
        "step": step,
        "strip": _strip(history, xs, label_every),
        "panels": [_panel(history, metric, xs, step) for metric in history.metrics],
        "audits": [_audit_row(history, point, index) for index, point in enumerate(history.points)],
        "metric_tables": [_metric_table(history, metric) for metric in history.metrics],
        "promotions": _promotion_rows(history),
        "token_rows": _token_rows(history),
        "blocked": len(history.blocked),
        "summary": _summary(history),
        "panel_height": _PANEL_H,
        "strip_height": _STRIP_H,
    }


def _summary(history: History) -> str:
    points = history.points
    span = f"{points[0].written_at[:16].replace('T', ' ')} to {points[-1].written_at[:16].replace('T', ' ')} UTC"
    promoted = len(history.promoted_points())
    return (
        f"{len(points)} audits (the latest {history.limit} at most), {span}; {len(history.blocked)} blocked; "
        f"{promoted} promotion{'s' if promoted != 1 else ''} among them"
    )


def _y(value: float) -> float:
    return round(_TOP + (1 - max(0.0, min(1.0, value))) * _PLOT_H, 1)


def _strip(history: History, xs: list[float], label_every: int) -> dict:
    marks = []
    for index, (point, x) in enumerate(zip(history.points, xs)):
        marks.append(
            {
                "x": round(x, 1),
                "point": point,
                "outcome": {PASSES: "pass", BLOCKS: "blocked"}.get(point.outcome, "undecided"),
                "label": point.commit[:10] if index % label_every == 0 or index == len(xs) - 1 else "",
                "promoted": "; ".join(promotion.reason for promotion in point.promotions),
                "title": _point_title(point),
            }
        )
    return {"marks": marks, "height": _STRIP_H}


def _point_title(point: Point) -> str:
    promoted = f"; promoted: {'; '.join(p.reason for p in point.promotions)}" if point.promotions else ""
    return (
        f"{point.commit} (run {point.run_id}), {point.written_at[:19].replace('T', ' ')} UTC: {point.verdict}; "
        f"compared with {point.baseline_commit}{' (re-scored)' if point.rescored else ''}{promoted}"
    )


def _panel(history: History, metric: str, xs: list[float], step: float) -> dict:
    line, baseline, band, dots = [], [], [], []
    upper: list[tuple[float, float]] = []
    lower: list[tuple[float, float]] = []

    def close_band() -> None:
        if upper:
            if len(upper) == 1:  # one audit with a baseline: a short band of its own
                (x, top), (_, bottom) = upper[0], lower[0]
                upper[:] = [(x - step / 3, top), (x + step / 3, top)]
                lower[:] = [(x - step / 3, bottom), (x + step / 3, bottom)]
            outline = upper + lower[::-1]
            band.append("M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in outline) + " Z")
            upper.clear()
            lower.clear()

    pen_down = False
    base_down = False
    for point, x in zip(history.points, xs):
        values = point.metrics.get(metric)
        mean = values.candidate_mean if values else None
        if mean is None:
            pen_down = False
        else:
            line.append(f"{'L' if pen_down else 'M'}{x:.1f},{_y(mean)}")
            pen_down = True
        if values and values.baseline_mean is not None:
            tolerance = values.tolerance or 0.0
            upper.append((x, _y(values.baseline_mean + tolerance)))
            lower.append((x, _y(values.baseline_mean - tolerance)))
            baseline.append(f"{'L' if base_down else 'M'}{x:.1f},{_y(values.baseline_mean)}")
            base_down = True
        else:
            close_band()
            base_down = False
        if mean is not None and values is not None:
            dots.append(
                {
                    "x": round(x, 1),
                    "y": _y(mean),
                    "point": point,
                    "regressed": values.verdict == "regressed",
                    "title": f"{metric} {mean:.3f} at {point.commit}: {_metric_words(values)}",
                }
            )
    close_band()
    return {
        "metric": metric,
        "line": " ".join(line),
        "baseline": " ".join(baseline),
        "band": " ".join(band),
        "dots": dots,
        "blocked": [round(x - step / 2, 1) for point, x in zip(history.points, xs) if point.blocked],
        "promoted": [round(x, 1) for point, x in zip(history.points, xs) if point.promotions],
        "ticks": [(value, _y(value)) for value in (0.0, 0.5, 1.0)],
        "top": _TOP,
        "bottom": _TOP + _PLOT_H,
        "left": _LEFT,
    }


def _metric_words(values: MetricPoint) -> str:
    parts = [values.verdict or "no verdict"]
    if values.delta is not None:
        parts.append(f"delta {values.delta:+.3f}")
    if values.baseline_mean is not None and values.tolerance is not None:
        parts.append(f"baseline {values.baseline_mean:.3f} +/- {values.tolerance:g}")
    if values.coverage is not None:
        parts.append(f"coverage {values.coverage:.0%}")
    return ", ".join(parts)


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _tokens(count: cost.TokenCount | None) -> str:
    if count is None:
        return "not recorded"
    return f"{count.prompt_tokens:,} / {count.completion_tokens:,}"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _audit_row(history: History, point: Point, index: int) -> dict:
    compared = point.baseline_commit + (" (re-scored)" if point.rescored else "")
    return {
        "point": point,
        "cells": [
            str(index + 1),
            point.written_at[:19].replace("T", " "),
            point.commit,
            point.run_id,
            point.verdict,
            compared,
            "; ".join(promotion.reason for promotion in point.promotions) or "",
            "not recorded" if point.tokens is None else f"{point.tokens.calls:,}",
            _tokens(point.tokens),
            _money(point.cost),
        ],
    }


def _metric_table(history: History, metric: str) -> dict:
    rows = []
    for point in history.points:
        values = point.metrics.get(metric)
        if values is None:
            continue
        rows.append(
            {
                "point": point,
                "regressed": values.verdict == "regressed",
                "cells": [
                    point.commit,
                    _fmt(values.candidate_mean),
                    _fmt(values.baseline_mean),
                    _fmt(values.delta, signed=True),
                    "n/a" if values.tolerance is None else f"{values.tolerance:g}",
                    "n/a" if values.coverage is None else f"{values.coverage:.0%}",
                    values.verdict,
                    _tokens(values.tokens),
                    _money(values.cost),
                ],
            }
        )
    return {"metric": metric, "rows": rows}


def _promotion_rows(history: History) -> list[list[str]]:
    shown = {id(promotion): point for point, promotion in history.promoted_points()}
    rows = []
    for promotion in history.promotions:
        point = shown.get(id(promotion))
        where = f"audit {history.points.index(point) + 1}" if point is not None else "not in this view"
        rows.append(
            [
                promotion.promoted_at[:19].replace("T", " "),
                promotion.commit,
                promotion.run_id or "",
                promotion.reason,
                promotion.branch or "",
                where,
            ]
        )
    return rows


def _token_rows(history: History) -> list[list[str]]:
    """Per metric, and for all the audits, the calls, tokens and cost over the audits that recorded them."""
    recorded = [point for point in history.points if point.tokens is not None]
    rows = []
    for metric in history.metrics:
        values = [point.metrics[metric] for point in recorded if metric in point.metrics]
        rows.append(_total_row(metric, [v.tokens for v in values], [v.cost for v in values]))
    rows.append(
        _total_row(
            f"all {len(recorded)} audits with tokens recorded (metrics and re-scoring)",
            [point.tokens for point in recorded],
            [point.cost for point in recorded],
        )
    )
    return rows


def _total_row(label: str, counts: list[cost.TokenCount | None], costs: list[float | None]) -> list[str]:
    total = sum((count for count in counts if count is not None), cost.TokenCount())
    money = None if not costs or any(value is None for value in costs) else sum(v for v in costs if v is not None)
    return [label, f"{total.calls:,}", f"{total.prompt_tokens:,}", f"{total.completion_tokens:,}", _money(money)]


_TEMPLATES = Environment(
    loader=PackageLoader("rag_eval_pipeline.reporting", "templates"),
    autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=True, default=False),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=StrictUndefined,
)
