"""The CI gate's outcome: an exit code and a JUnit XML file that CI systems show per metric.

Exit codes: 0 the candidate passes (or there was no baseline yet and it became the baseline),
1 a regression blocks it, 2 the gate could not decide (bad input, failed run).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from rag_eval_pipeline.reporting.compare import BLOCK, NOTHING_SCORED

PASSED, REGRESSED, ERROR = 0, 1, 2


def exit_code(verdict: str) -> int:
    return REGRESSED if verdict in (BLOCK, NOTHING_SCORED) else PASSED


def junit_xml(report: pd.DataFrame, suite_name: str) -> str:
    """One test case per metric; a regressed metric is a failure with its means and delta."""
    failures = int((report["verdict"] == "regressed").sum())
    suite = ET.Element("testsuite", name=suite_name, tests=str(len(report)), failures=str(failures), errors="0")
    for row in report.to_dict("records"):
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=str(row["metric"]))
        if row["verdict"] == "regressed":
            failure = ET.SubElement(case, "failure", message=_failure_message(row))
            failure.text = str(row.get("note") or "")
        elif str(row["verdict"]).startswith("no baseline"):
            ET.SubElement(case, "skipped", message="no baseline yet: this candidate became the baseline")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def write_junit(report: pd.DataFrame, suite_name: str, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(report, suite_name) + "\n", encoding="utf-8")
    return path


def _failure_message(row: dict) -> str:
    return (
        f"{row['metric']}: candidate {_number(row['candidate_mean'])} vs baseline {_number(row['baseline_mean'])} "
        f"(delta {_number(row['delta'])}), coverage {_number(row['coverage'])} vs {_number(row['baseline_coverage'])}"
    )


def _number(value) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{float(value):.3f}"
