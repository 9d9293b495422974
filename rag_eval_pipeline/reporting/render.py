"""The regression report as Markdown (Dagster metadata, the CLI) and as one self-contained HTML file.

The layout lives in Jinja2 templates shipped with the package (templates/); this module only turns a
Comparison and its Analysis into plain cells and numbers for them. The HTML has inline CSS and inline
SVG only (no script, no external file), so it can be mailed or attached to a CI run and opened offline;
its template autoescapes every value. The Markdown escapes HTML in free text itself (md_text).
"""

from __future__ import annotations

import re
from html import escape

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from rag_eval_pipeline.core.judging.results import OFFLINE_JUDGE_ABSTAINS
from rag_eval_pipeline.reporting.compare import (
    BAD,
    BLOCKS,
    GOOD,
    PASSES,
    UNCLASSIFIED,
    UNDECIDED,
    Analysis,
    Comparison,
    decision,
)

INTERVAL_NOTE = (
    "delta: candidate - baseline mean over the items measured in both runs; "
    "[low, high]: its paired bootstrap 95% interval"
)
QUADRANT_NOTE = (
    "retrieval is good when hit_rate == 1 (context_recall >= 0.5 when hit rate is unmeasured); "
    "generation is good when faithfulness >= 0.5 and answer_correctness >= 0.5, bad when either is below"
)


def render_markdown(
    comparison: Comparison,
    title: str,
    details: dict[str, str],
    analysis: Analysis | None = None,
    verdict: str | None = None,
    tokens: dict | None = None,
    trace_url: str = "",
) -> str:
    """verdict: the report's overall verdict, when it says more than the comparison's (see report.Outcome).
    tokens: the judge's calls, tokens and cost (report.token_section), or None to leave the section out.
    trace_url: Phoenix's base URL (RAG_EVAL_PHOENIX_URL): each worst item's trace id becomes a link into it."""
    context = _context(comparison, title, details, analysis, verdict, tokens, trace_url)
    return _TEMPLATES.get_template("report.md").render(context)


def render_html(
    comparison: Comparison,
    title: str,
    details: dict[str, str],
    analysis: Analysis | None = None,
    verdict: str | None = None,
    tokens: dict | None = None,
    trace_url: str = "",
) -> str:
    context = _context(comparison, title, details, analysis, verdict, tokens, trace_url)
    return _TEMPLATES.get_template("report.html").render(context)


def _md_text(value) -> str:
    """Free text (questions, answers, evidence) on one line, with HTML escaped: Markdown viewers,
    the Dagster UI among them, would otherwise render a tag in a question."""
    return escape(_one_line(value), quote=False)


def _md_cell(value) -> str:
    return _one_line(value).replace("|", "/")


def _one_line(value) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _answer(value: str | None) -> str:
    if value is None:
        return "(not stored)"
    return value if value.strip() else "(empty answer)"


def _percent(value) -> str:
    return "n/a" if _missing(value) else f"{value:.0%}"


def _missing(value) -> bool:
    return value is None or bool(pd.isna(value))


def _fmt(value, signed: bool = False) -> str:
    if _missing(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


# Autoescape is on for .html templates only: Markdown is not HTML, and md_text escapes its free text.
_TEMPLATES = Environment(
    loader=PackageLoader("rag_eval_pipeline.reporting", "templates"),
    autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=True, default=False),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=StrictUndefined,
)
_TEMPLATES.filters.update(md_text=_md_text, md_cell=_md_cell, answer=_answer, fmt=_fmt)


# --- What the templates show ------------------------------------------------------------------------


def _context(
    comparison: Comparison,
    title: str,
    details: dict[str, str],
    analysis: Analysis | None,
    verdict: str | None,
    tokens: dict | None = None,
    trace_url: str = "",
) -> dict:
    rows = comparison.table.to_dict("records")
    verdict = verdict or comparison.verdict
    return {
        "title": title,
        "verdict": verdict,
        "verdict_class": {PASSES: "pass", BLOCKS: "block", UNDECIDED: "unmeasured"}[decision(verdict)],
        "details": {key: str(value) for key, value in details.items()},
        "tolerance_summary": _tolerance_summary(comparison),
        "min_coverage": f"{comparison.min_coverage:.0%}",
        "interval_note": INTERVAL_NOTE,
        "quadrant_note": QUADRANT_NOTE,
        "metrics": [_metric_row(row) for row in rows],
        "failing_metrics": comparison.failing_metrics,
        "notes": [(row["metric"], row["note"]) for row in rows if row["note"]] + _abstentions(rows),
        "chart": _chart(rows),
        "analysis": _analysis(analysis, trace_url) if analysis is not None else None,
        "trust": [_trust_row(row) for row in rows],
        "decided_on": "PPI intervals where a metric has labels"
        if comparison.decided_on == "ppi"
        else "the judge's own scores",
        "trust_note": TRUST_NOTE,
        "tokens": tokens,
    }


TRUST_NOTE = (
    "calibration: the judge's agreement with your people's labels (only a calibration by this very judge "
    "counts); PPI: prediction-powered 95% intervals, the judge's scores corrected by the labelled items"
)


def _trust_row(row: dict) -> list[str]:
    def interval(name: str) -> str:
        value, low, high = row.get(name), row.get(f"{name}_low"), row.get(f"{name}_high")
        signed = name.endswith("delta")
        return "n/a" if _missing(value) else f"{_fmt(value, signed)} [{_fmt(low, signed)}, {_fmt(high, signed)}]"

    return [
        row["metric"],
        str(row.get("judge_calibration") or ""),
        interval("ppi_mean"),
        interval("ppi_delta"),
        str(row.get("ppi_note") or ""),
        "PPI interval" if row.get("decided_on") == "ppi" else "judge's scores",
    ]


# A reason the offline judge gave for declining an item, with its count, as compare.Coverage.why lists it.
_ABSTAINED = re.compile(re.escape(OFFLINE_JUDGE_ABSTAINS) + r"[^;]*? \((\d+) items?\)")


def _abstentions(rows: list[dict]) -> list[tuple[str, str]]:
    """Per metric, how many of the candidate's items the offline judge abstained on (counted against coverage).
    Read from the candidate's side of the note; "at least" when the note folds some reasons away."""
    out = []
    for row in rows:
        candidate_side = str(row["note"] or "").split("baseline measured on", 1)[0]
        counts = [int(n) for n in _ABSTAINED.findall(candidate_side)]
        if counts:
            bound = "at least " if "other reasons" in candidate_side else ""
            total = sum(counts)
            out.append(
                (
                    row["metric"],
                    f"abstained: the offline judge declined {bound}{total} item{'s' if total > 1 else ''} "
                    "(unmeasured, counted against coverage; why above)",
                )
            )
    return out


def _metric_row(row: dict) -> dict:
    cells = [
        row["metric"],
        _fmt(row["candidate_mean"]),
        _fmt(row["baseline_mean"]),
        _delta_with_interval(row),
        f"{row['n_measured']}/{row['n_applicable']}",
        _percent(row["coverage"]),
        f"{row['tolerance']:g}",
        row["verdict"],
    ]
    return {"cells": cells, "html_cells": [*cells, row["note"]], "regressed": row["verdict"] == "regressed"}


def _analysis(analysis: Analysis, trace_url: str = "") -> dict:
    return {
        "breakdown": [
            [
                row["question_type"],
                row["metric"],
                _fmt(row["candidate_mean"]),
                _fmt(row["baseline_mean"]),
                _fmt(row["delta"], signed=True),
                str(row["n"]),
            ]
            for row in analysis.breakdown.to_dict("records")
        ],
        "stage_summary": analysis.stage_summary,
        "quadrants": _quadrant_cells(analysis.quadrants),
        "worst_basis": analysis.worst_basis,
        "worst": [
            {**item, "trace": _trace(item.get("trace_id"), item.get("span_id"), trace_url)}
            for item in analysis.worst.to_dict("records")
        ],
    }


def _trace(trace_id, span_id, trace_url: str) -> dict | None:
    """The item's trace: its id, and a link into Phoenix when its URL is set (an operator's tool: see
    docs/tracing.md before giving such a report to a tenant). The link names the item's own span: a run's
    trace holds every item, and Phoenix opens it at that span."""
    if not trace_id or _missing(trace_id):
        return None
    if not trace_url:
        return {"id": str(trace_id), "link": ""}
    base = trace_url.rstrip("/")
    has_span = span_id and not _missing(span_id)
    link = f"{base}/redirects/spans/{span_id}" if has_span else f"{base}/redirects/traces/{trace_id}"
    return {"id": str(trace_id), "link": link}


def _quadrant_cells(quadrants: pd.DataFrame) -> list[list[str]]:
    counts = quadrants.set_index(["run", "retrieval", "generation"])["n"]
    return [
        [run, f"retrieval {retrieval}", *(str(int(counts[(run, retrieval, g)])) for g in (GOOD, BAD, UNCLASSIFIED))]
        for run in dict.fromkeys(quadrants["run"])
        for retrieval in (GOOD, BAD, UNCLASSIFIED)
    ]


# Bar chart geometry, in SVG user units. Scores are in [0, 1].
_LABEL_W, _BAR_W, _BAR_H, _ROW_H, _PAD = 170, 420, 12, 40, 10


def _chart(rows: list[dict]) -> dict:
    axis_y = _PAD + _ROW_H * len(rows)
    return {
        "width": _LABEL_W + _BAR_W + 80,
        "height": axis_y + _PAD + 20,
        "left": _LABEL_W,
        "bar_width": _BAR_W,
        "bar_height": _BAR_H,
        "axis_y": axis_y,
        "ticks": (0, 0.25, 0.5, 0.75, 1),
        "rows": [_chart_row(row, _PAD + i * _ROW_H) for i, row in enumerate(rows)],
    }


def _chart_row(row: dict, y: int) -> dict:
    candidate_y = y + _BAR_H + 2
    whisker = None
    if not (_missing(row["delta_ci_low"]) or _missing(row["baseline_mean"])):
        whisker = {
            "low": _LABEL_W + _x(row["baseline_mean"] + row["delta_ci_low"]),
            "high": _LABEL_W + _x(row["baseline_mean"] + row["delta_ci_high"]),
            "mid": candidate_y + _BAR_H / 2,
        }
    return {
        "metric": str(row["metric"]),
        "y": y,
        "label_y": y + _BAR_H + 4,
        "candidate_y": candidate_y,
        "baseline": _fmt(row["baseline_mean"]),
        "candidate": _fmt(row["candidate_mean"]),
        "baseline_width": None if _missing(row["baseline_mean"]) else _x(row["baseline_mean"]),
        "candidate_width": 0.0 if _missing(row["candidate_mean"]) else _x(row["candidate_mean"]),
        "interval": _delta_with_interval(row),
        "whisker": whisker,
    }


def _x(score: float) -> float:
    return max(0.0, min(1.0, float(score))) * _BAR_W


# --- Shared cells -----------------------------------------------------------------------------------


def _tolerance_summary(comparison: Comparison) -> str:
    overrides = [
        f"{row['metric']} {row['tolerance']:g}"
        for row in comparison.table.to_dict("records")
        if row["tolerance"] != comparison.tolerance
    ]
    return f"default {comparison.tolerance:g}" + (f"; {', '.join(overrides)}" if overrides else "")


def _delta_with_interval(row: dict) -> str:
    if _missing(row["delta"]):
        return "n/a"
    if _missing(row["delta_ci_low"]):
        return _fmt(row["delta"], signed=True)
    return f"{_fmt(row['delta'], signed=True)} [{_fmt(row['delta_ci_low'], signed=True)}, {_fmt(row['delta_ci_high'], signed=True)}]"
