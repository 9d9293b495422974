"""The gate's verdict on one audit, as `rag-eval gate` prints it and the Python API returns it.

Built from the regression report the audit stored, never from another audit's (several gates of a tenant
may run at once); the exit status is derived from it: 0 pass, 1 regression, 2 undecided.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rag_eval_pipeline.reporting.compare import BLOCKS, PASSES, decision

EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2


@dataclass(frozen=True)
class GateVerdict:
    tenant: str
    version: str
    commit: str
    run_id: str
    verdict: str  # the report's overall verdict, e.g. "pass" or "block (...)"
    report: pd.DataFrame  # the regression report: one row per metric, with its verdict and note
    report_path: str  # where the Markdown report is kept

    @classmethod
    def from_report(
        cls, report: pd.DataFrame, tenant: str, version: str, commit: str, run_id: str, report_path: str
    ) -> GateVerdict:
        if report.empty:
            raise ValueError(f"run {run_id} wrote no regression report for {tenant}/{version}: no verdict, so no pass")
        return cls(tenant, version, commit, run_id, str(report["verdict_overall"].iloc[0]), report, report_path)

    @property
    def decision(self) -> str:
        """PASSES, BLOCKS or UNDECIDED (reporting/compare.py)."""
        return decision(self.verdict)

    @property
    def exit_code(self) -> int:
        return {PASSES: EXIT_PASS, BLOCKS: EXIT_REGRESSION}.get(self.decision, EXIT_UNDECIDED)

    @property
    def passed(self) -> bool:
        return self.decision == PASSES

    def metrics_with(self, verdict: str) -> list[str]:
        return self.report.loc[self.report["verdict"] == verdict, "metric"].astype(str).tolist()

    @property
    def regressed(self) -> list[str]:
        return self.metrics_with("regressed")

    @property
    def baseline_commit(self) -> str:
        return str(self.report["baseline_commit"].iloc[0])

    @property
    def promoted(self) -> str:
        """Why this candidate became the baseline; "" when it did not."""
        return str(self.report["promoted_to_baseline"].iloc[0] or "")

    def lines(self) -> list[str]:
        """What the gate prints on stdout."""
        lines = [
            f"gate: {self.verdict.upper()} for commit {self.commit} on {self.tenant}/{self.version}"
            + (f"; regressed: {', '.join(self.regressed)}" if self.regressed else "")
        ]
        lines += [f"{kind} {metric}: {note}" for kind, metric, note in self._undecided_rows()]
        lines.append(f"baseline: {self.baseline_commit}")
        source = str(self.report["baseline_source"].iloc[0])
        if "re-scored" in source:
            lines.append(f"note: {source.split('; ', 1)[1]}")
        if self.promoted:
            lines.append(f"{self.commit} is now the baseline: {self.promoted}")
        lines.append(f"report: {self.report_path}")
        return lines

    def error_line(self) -> str | None:
        """Why the gate cannot decide (stderr, with exit 2); None when it decided."""
        if self.exit_code != EXIT_UNDECIDED:
            return None
        unmeasured, undecided = self.metrics_with("unmeasured"), self.metrics_with("undecided")
        why = f"{', '.join(unmeasured)} measured on too few items (see above)" if unmeasured else self.verdict
        if undecided and not unmeasured:
            why = f"the PPI intervals of {', '.join(undecided)} straddle their tolerance (see above)"
        return f"the gate cannot decide on commit {self.commit} ({self.tenant}/{self.version}): {why}"

    def _undecided_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for kind in ("unmeasured", "undecided"):  # --decide-on ppi: an interval straddles a tolerance
            chosen = self.report.loc[self.report["verdict"] == kind]
            rows += [(kind, str(metric), str(note)) for metric, note in zip(chosen["metric"], chosen["note"])]
        return rows
