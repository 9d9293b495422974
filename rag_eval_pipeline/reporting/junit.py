"""The CI gate's verdict as JUnit XML, which CI systems show per metric."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from rag_eval_pipeline.core.files import atomic_write_text


def junit_xml(report: pd.DataFrame, suite_name: str) -> str:
    """One test case per metric: a regressed metric is a failure with its means and delta; a metric measured on
    too few items, or whose PPI interval straddles the tolerance, is an error (the gate could not test it); without a baseline, or where a metric applies to
    no item, the case is skipped."""
    verdicts = report["verdict"]
    suite = ET.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(report)),
        failures=str(int((verdicts == "regressed").sum())),
        errors=str(int(verdicts.isin(["unmeasured", "undecided"]).sum())),
    )
    for row in report.to_dict("records"):
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=str(row["metric"]))
        note = str(row.get("note") or "")
        if row["verdict"] == "regressed":
            ET.SubElement(case, "failure", message=_failure_message(row)).text = note
        elif row["verdict"] == "unmeasured":
            ET.SubElement(case, "error", message=f"{row['metric']}: measured on too few items to decide").text = note
        elif row["verdict"] == "undecided":
            ET.SubElement(
                case, "error", message=f"{row['metric']}: its PPI interval straddles the tolerance"
            ).text = note
        elif str(row["verdict"]).startswith("no baseline"):
            ET.SubElement(case, "skipped", message=_no_baseline_message(row))
        elif row["verdict"] == "not applicable":
            ET.SubElement(case, "skipped", message=f"{row['metric']} applies to none of the items").text = note
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def _no_baseline_message(row: dict) -> str:
    promoted = str(row.get("promoted_to_baseline") or "")
    return (
        "no baseline yet: this candidate became the baseline"
        if promoted
        else "no baseline yet: nothing to compare with"
    )


def write_junit(report: pd.DataFrame, suite_name: str, path: Path) -> Path:
    return atomic_write_text(Path(path), junit_xml(report, suite_name) + "\n")


def _failure_message(row: dict) -> str:
    return (
        f"{row['metric']}: candidate {_number(row['candidate_mean'])} vs baseline {_number(row['baseline_mean'])} "
        f"(delta {_number(row['delta'])}), coverage {_number(row['coverage'])} vs {_number(row['baseline_coverage'])}"
    )


def _number(value) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{float(value):.3f}"
