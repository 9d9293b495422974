"""The regression report as Markdown (Dagster metadata, the CLI) and as one self-contained HTML file.

The HTML has inline CSS and inline SVG only (no script, no external file), so it can be mailed or
attached to a CI run and opened offline. Every piece of text in it goes through html.escape.
"""

from __future__ import annotations

from html import escape

import pandas as pd

from rag_eval_pipeline.reporting.compare import BAD, GOOD, UNCLASSIFIED, Analysis, Comparison

INTERVAL_NOTE = ("delta: candidate - baseline mean over the items measured in both runs; "
                 "[low, high]: its paired bootstrap 95% interval")
QUADRANT_NOTE = ("retrieval is good when hit_rate == 1 (context_recall >= 0.5 when hit rate is unmeasured); "
                 "generation is good when faithfulness >= 0.5 and answer_correctness >= 0.5, bad when either is below")


# --- Markdown ---------------------------------------------------------------------------------------


def render_markdown(comparison: Comparison, title: str, details: dict[str, str], analysis: Analysis | None = None) -> str:
    lines = [f"# {title}", "", f"**Verdict: {comparison.verdict.upper()}**", ""]
    lines += [f"- {key}: {value}" for key, value in details.items()]
    lines += [f"- tolerance: a metric blocks when its mean, or its coverage, drops by more than its tolerance "
              f"({_tolerance_summary(comparison)})", f"- {INTERVAL_NOTE}", ""]
    lines += _md_table(
        ["metric", "candidate", "baseline", "delta [95% CI]", "measured", "coverage", "tolerance", "verdict"],
        [[row["metric"], _fmt(row["candidate_mean"]), _fmt(row["baseline_mean"]), _delta_with_interval(row),
          f"{row['n_measured']}/{row['n_items']}", f"{row['coverage']:.0%}", f"{row['tolerance']:g}", row["verdict"]]
         for row in comparison.table.to_dict("records")],
    )
    if comparison.failing_metrics:
        lines += ["", f"Regressed: {', '.join(comparison.failing_metrics)}."]
    notes = [f"- {row['metric']}: {row['note']}" for row in comparison.table.to_dict("records") if row["note"]]
    if notes:
        lines += ["", "Unmeasured items (excluded from the means, counted in coverage):", *notes]
    if analysis is not None:
        lines += _md_analysis(analysis)
    return "\n".join(lines) + "\n"


def _md_analysis(analysis: Analysis) -> list[str]:
    lines = ["", "## By question type", ""]
    lines += _md_table(["question type", "metric", "candidate", "baseline", "delta", "n"], _breakdown_cells(analysis))
    lines += ["", "## Which stage", "", analysis.stage_summary, "", f"_{QUADRANT_NOTE}_", ""]
    lines += _md_table(["run", "retrieval", "generation good", "generation bad", "generation unclassified"],
                       _quadrant_cells(analysis.quadrants))
    lines += ["", f"## Worst regressed items (by drop in {', '.join(analysis.worst_basis)})", ""]
    if analysis.worst.empty:
        lines.append("No item scored lower than in the baseline.")
    for rank, item in enumerate(analysis.worst.to_dict("records"), start=1):
        lines += [
            f"{rank}. **{_md_text(item['qa_id'])}** ({_md_text(item['question_type']) or 'type unknown'}) "
            f"{item['metric']}: {_fmt(item['baseline_score'])} -> {_fmt(item['candidate_score'])} "
            f"(drop {_fmt(item['drop'])})",
            f"   - question: {_md_text(item['question'])}",
            f"   - baseline answer: {_md_text(_answer(item['baseline_answer']))}",
            f"   - candidate answer: {_md_text(_answer(item['candidate_answer']))}",
            f"   - evidence: {_md_text(item['evidence']) or '(none)'}",
        ]
    return lines


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_one_line(cell).replace("|", "/") for cell in row) + " |" for row in rows]
    return lines


def _md_text(value) -> str:
    """Free text (questions, answers, evidence) on one line, with HTML escaped: Markdown viewers,
    the Dagster UI among them, would otherwise render a tag in a question."""
    return escape(_one_line(value), quote=False)


def _one_line(value) -> str:
    return " ".join(str(value).split()) if value is not None else ""


# --- HTML -------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.verdict{font-size:1.3em;font-weight:bold}.block{color:#b00020}.pass{color:#17692f}
.regressed{background:#fde7e9}.bar.candidate{fill:#3b6fb6}.bar.baseline{fill:#b9b9b9}.whisker{stroke:#111;stroke-width:2}
.note{color:#555;font-size:.9em}blockquote{margin:.3em 0 .3em 1em;color:#444;white-space:pre-wrap}
"""


def render_html(comparison: Comparison, title: str, details: dict[str, str], analysis: Analysis | None = None) -> str:
    verdict_class = "block" if comparison.verdict.startswith("block") else "pass"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>", f"<h1>{escape(title)}</h1>",
        f'<p class="verdict {verdict_class}">Verdict: {escape(comparison.verdict.upper())}</p>',
        "<ul>" + "".join(f"<li>{escape(key)}: {escape(str(value))}</li>" for key, value in details.items()) + "</ul>",
        f'<p class="note">A metric blocks when its mean, or its coverage, drops by more than its tolerance '
        f"({escape(_tolerance_summary(comparison))}). {escape(INTERVAL_NOTE)}.</p>",
        metric_chart(comparison.table),
        _html_table(
            ["metric", "candidate", "baseline", "delta [95% CI]", "measured", "coverage", "tolerance", "verdict", "note"],
            [[row["metric"], _fmt(row["candidate_mean"]), _fmt(row["baseline_mean"]), _delta_with_interval(row),
              f"{row['n_measured']}/{row['n_items']}", f"{row['coverage']:.0%}", f"{row['tolerance']:g}",
              row["verdict"], row["note"]] for row in comparison.table.to_dict("records")],
            highlight=[row["verdict"] == "regressed" for row in comparison.table.to_dict("records")],
        ),
    ]
    if analysis is not None:
        parts += _html_analysis(analysis)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_analysis(analysis: Analysis) -> list[str]:
    parts = ["<h2>By question type</h2>",
             _html_table(["question type", "metric", "candidate", "baseline", "delta", "n"], _breakdown_cells(analysis)),
             "<h2>Which stage</h2>", f"<p>{escape(analysis.stage_summary)}</p>", f'<p class="note">{escape(QUADRANT_NOTE)}</p>',
             _html_table(["run", "retrieval", "generation good", "generation bad", "generation unclassified"],
                         _quadrant_cells(analysis.quadrants)),
             f"<h2>Worst regressed items (by drop in {escape(', '.join(analysis.worst_basis))})</h2>"]
    if analysis.worst.empty:
        parts.append("<p>No item scored lower than in the baseline.</p>")
    parts.append("<ol>")
    for item in analysis.worst.to_dict("records"):
        parts.append(
            f"<li><strong>{escape(str(item['qa_id']))}</strong> ({escape(item['question_type'] or 'type unknown')}) "
            f"{escape(item['metric'])}: {_fmt(item['baseline_score'])} &rarr; {_fmt(item['candidate_score'])} "
            f"(drop {_fmt(item['drop'])})"
            + "".join(
                f"<div>{label}:<blockquote>{escape(text)}</blockquote></div>"
                for label, text in (
                    ("question", item["question"] or ""), ("baseline answer", _answer(item["baseline_answer"])),
                    ("candidate answer", _answer(item["candidate_answer"])), ("judge evidence", item["evidence"] or "(none)"),
                )
            )
            + "</li>"
        )
    parts.append("</ol>")
    return parts


def _html_table(header: list[str], rows: list[list[str]], highlight: list[bool] | None = None) -> str:
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"
    marked = '<tr class="regressed">'
    body = "".join(
        (marked if highlight and highlight[i] else "<tr>")
        + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>"
        for i, row in enumerate(rows)
    )
    return f"<table>{head}{body}</table>"


# Bar chart geometry, in SVG user units. Scores are in [0, 1].
_LABEL_W, _BAR_W, _BAR_H, _ROW_H, _PAD = 170, 420, 12, 40, 10


def metric_chart(table: pd.DataFrame) -> str:
    """Horizontal bars per metric: baseline (grey) and candidate (blue) means over the paired items.

    The whisker on the candidate's bar is baseline mean + the delta's 95% interval: where the
    candidate's mean would plausibly lie given the paired differences.
    """
    height = _PAD * 2 + _ROW_H * len(table) + 20
    width = _LABEL_W + _BAR_W + 80
    parts = [f'<svg width="{width}" height="{height}" role="img" '
             f'aria-label="candidate and baseline mean per metric">']
    for i, row in enumerate(table.to_dict("records")):
        parts += _chart_row(row, _PAD + i * _ROW_H)
    axis_y = _PAD + _ROW_H * len(table)
    parts += [f'<line x1="{_LABEL_W}" y1="{axis_y}" x2="{_LABEL_W + _BAR_W}" y2="{axis_y}" stroke="#999"/>']
    parts += [f'<text x="{_LABEL_W + _BAR_W * t}" y="{axis_y + 14}" font-size="11" text-anchor="middle">{t:g}</text>'
              for t in (0, 0.25, 0.5, 0.75, 1)]
    parts.append("</svg>")
    return "\n".join(parts)


def _chart_row(row: dict, y: int) -> list[str]:
    metric = escape(str(row["metric"]))
    parts = [f'<text x="0" y="{y + _BAR_H + 4}" font-size="13">{metric}</text>']
    if not _missing(row["baseline_mean"]):
        parts.append(f'<rect class="bar baseline" x="{_LABEL_W}" y="{y}" width="{_x(row["baseline_mean"]):.1f}" '
                     f'height="{_BAR_H}"><title>{metric} baseline {_fmt(row["baseline_mean"])}</title></rect>')
    candidate_y = y + _BAR_H + 2
    width = 0.0 if _missing(row["candidate_mean"]) else _x(row["candidate_mean"])
    parts.append(f'<rect class="bar candidate" x="{_LABEL_W}" y="{candidate_y}" width="{width:.1f}" '
                 f'height="{_BAR_H}"><title>{metric} candidate {_fmt(row["candidate_mean"])}</title></rect>')
    parts.append(f'<text x="{_LABEL_W + width + 6:.1f}" y="{candidate_y + _BAR_H - 2}" font-size="11">'
                 f'{_fmt(row["candidate_mean"])}</text>')
    if not (_missing(row["delta_ci_low"]) or _missing(row["baseline_mean"])):
        low = _LABEL_W + _x(row["baseline_mean"] + row["delta_ci_low"])
        high = _LABEL_W + _x(row["baseline_mean"] + row["delta_ci_high"])
        mid = candidate_y + _BAR_H / 2
        parts.append(f'<g class="whisker"><title>{metric} delta 95% CI {_delta_with_interval(row)}</title>'
                     f'<line x1="{low:.1f}" y1="{mid}" x2="{high:.1f}" y2="{mid}"/>'
                     f'<line x1="{low:.1f}" y1="{mid - 4}" x2="{low:.1f}" y2="{mid + 4}"/>'
                     f'<line x1="{high:.1f}" y1="{mid - 4}" x2="{high:.1f}" y2="{mid + 4}"/></g>')
    return parts


def _x(score: float) -> float:
    return max(0.0, min(1.0, float(score))) * _BAR_W


# --- Shared cells -----------------------------------------------------------------------------------


def _breakdown_cells(analysis: Analysis) -> list[list[str]]:
    return [[row["question_type"], row["metric"], _fmt(row["candidate_mean"]), _fmt(row["baseline_mean"]),
             _fmt(row["delta"], signed=True), str(row["n"])] for row in analysis.breakdown.to_dict("records")]


def _quadrant_cells(quadrants: pd.DataFrame) -> list[list[str]]:
    counts = quadrants.set_index(["run", "retrieval", "generation"])["n"]
    return [
        [run, f"retrieval {retrieval}", *(str(int(counts[(run, retrieval, g)])) for g in (GOOD, BAD, UNCLASSIFIED))]
        for run in dict.fromkeys(quadrants["run"])
        for retrieval in (GOOD, BAD, UNCLASSIFIED)
    ]


def _answer(value: str | None) -> str:
    if value is None:
        return "(not stored)"
    return value if value.strip() else "(empty answer)"


def _tolerance_summary(comparison: Comparison) -> str:
    overrides = [f"{row['metric']} {row['tolerance']:g}" for row in comparison.table.to_dict("records")
                 if row["tolerance"] != comparison.tolerance]
    return f"default {comparison.tolerance:g}" + (f"; {', '.join(overrides)}" if overrides else "")


def _delta_with_interval(row: dict) -> str:
    if _missing(row["delta"]):
        return "n/a"
    if _missing(row["delta_ci_low"]):
        return _fmt(row["delta"], signed=True)
    return f"{_fmt(row['delta'], signed=True)} [{_fmt(row['delta_ci_low'], signed=True)}, {_fmt(row['delta_ci_high'], signed=True)}]"


def _missing(value) -> bool:
    return value is None or bool(pd.isna(value))


def _fmt(value, signed: bool = False) -> str:
    if _missing(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
