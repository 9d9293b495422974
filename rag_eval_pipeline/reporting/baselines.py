"""When an audited candidate becomes its tenant's baseline: the promotion rules, in one place.

Where the audits and the promotions are kept is the stores' business (stores/local_baselines.py,
stores/database/baselines.py, behind stores.protocols.BaselineStore).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_eval_pipeline.reporting.compare import NO_BASELINE, PASS

# Why a commit became the baseline.
EXPLICIT = "promoted explicitly"
FIRST_RUN = "first audited candidate of this golden-set version (proposed baseline)"


def passed_on(branch: str) -> str:
    return f"passed the gate on {branch}"


@dataclass(frozen=True)
class PromotionPolicy:
    """What a run was asked about its audit becoming the baseline (ReportConfig)."""

    explicit: bool = False  # promote it, whatever the verdict (a person's decision), if it was measured enough
    branch: str = ""  # the candidate's branch ("" when not said: a local run, a manifest without one)
    main_branch: str = "main"  # the followed branch: only its gates set and move the baseline
    baseline_requested: bool = False  # compared with a commit named by --baseline: for comparison only
    first_audit_is_baseline: bool = False  # `rag-eval run` and `demo`: the operator's own first audit of a version

    @property
    def on_followed_branch(self) -> bool:
        return bool(self.branch) and self.branch == self.main_branch


def promotion_reason(verdict: str, measured_enough: bool, had_baseline: bool, policy: PromotionPolicy) -> str | None:
    """Why the audited candidate becomes the baseline, or None when it does not. The rules, in one place:

    - never unless every metric that applies was measured on enough of its items (Comparison.measured_enough);
    - a person's explicit promotion (`--promote-baseline`), whatever the verdict;
    - never when the run compared with a baseline it named (`--baseline`);
    - the first audit of a version, on the followed branch (or by `rag-eval run`/`demo`);
    - a pass on the followed branch.
    """
    if not measured_enough:
        return None
    if policy.explicit:
        return EXPLICIT
    if policy.baseline_requested:
        return None
    if not had_baseline:
        return (
            FIRST_RUN
            if verdict == NO_BASELINE and (policy.on_followed_branch or policy.first_audit_is_baseline)
            else None
        )
    return passed_on(policy.main_branch) if verdict == PASS and policy.on_followed_branch else None
