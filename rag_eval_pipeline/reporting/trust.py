"""How far the report may trust its judge on this tenant: the judge's calibration against the tenant's
labels, per metric, and prediction-powered intervals (core/trust/ppi.py) of each mean and delta.

Only a calibration made by the very judge that scored the run counts (same name and prompt hash, k and
metric set): another judge's agreement with the labels says nothing about this one. With
`decide_on="ppi"`, a judged metric's verdict comes from its PPI delta interval instead of the judge's
own delta: regressed when the whole interval lies below -tolerance, ok when none of it does, undecided
when it straddles -tolerance (more labels or items are needed). Coverage rules come first, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.trust.ppi import MIN_LABELS, ppi_delta, ppi_mean
from rag_eval_pipeline.evaluation.calibration import UNCALIBRATED_NOTE
from rag_eval_pipeline.evaluation.user_metrics import is_judged

JUDGE, PPI = "judge", "ppi"
DECIDE_ON = (JUDGE, PPI)
NOT_JUDGED = "no judge (scored without one)"
LABELLED_COLUMNS = ["metric", "label_key", "commit", "score", "label"]
STALE = "stale: labels changed since this judge's calibration (run `rag-eval calibrate` again); not used"
PPI_COLUMNS = ["ppi_mean", "ppi_mean_low", "ppi_mean_high", "ppi_delta", "ppi_delta_low", "ppi_delta_high"]


class MissingLabels(ValueError):
    """`decide_on="ppi"` without labels scored by this judge: nothing to correct the judge with."""


@dataclass(frozen=True)
class JudgeTrust:
    """The judge's calibration on the tenant per metric, and the labelled items it scored (measured ones)."""

    calibration: dict[str, str] = field(default_factory=dict)  # metric -> a phrase (describe / uncalibrated)
    labelled: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LABELLED_COLUMNS))
    judge: str = ""

    def phrase(self, metric: str) -> str:
        return self.calibration.get(metric, UNCALIBRATED_NOTE) if is_judged(metric) else NOT_JUDGED

    def pairs(self, metric: str) -> pd.DataFrame:
        return self.labelled[self.labelled["metric"] == metric]


def judge_trust(store, tenant: str, scores: pd.DataFrame) -> JudgeTrust:
    """The trust the tenant's stored calibration gives the judge that scored `scores`."""
    from rag_eval_pipeline.evaluation.calibration import JudgeIdentity, describe, labels_digest, load_calibration
    from rag_eval_pipeline.evaluation.labels import read_labels
    from rag_eval_pipeline.reporting.compare import scoring_identity

    identity = scoring_identity(scores)
    if not str(identity["k"]).isdigit():  # scores of an older version that recorded no k: no identity to match
        return JudgeTrust(judge=str(identity["judge"]))
    judge = JudgeIdentity(str(identity["judge"]), int(identity["k"]), tuple(identity["metrics"]))
    calibration = load_calibration(store, tenant, judge)
    if calibration is None:
        return JudgeTrust(judge=judge.judge)
    labels = read_labels(store, tenant)
    stored_digest = str(calibration.summary["labels_digest"].iloc[0] or "")
    current = labels_digest(labels[labels["metric"].isin(list(judge.metrics))].reset_index(drop=True))
    if stored_digest and stored_digest != current:  # labels were added or changed since: not what was measured
        return JudgeTrust({str(m): STALE for m in calibration.summary["metric"]}, judge=judge.judge)
    phrases = {str(row["metric"]): describe(row) for row in calibration.summary.to_dict("records")}
    items = calibration.items.dropna(subset=["score", "label"])
    commits = labels.drop_duplicates("label_key").set_index("label_key")["commit"]
    labelled = items.assign(commit=items["label_key"].map(commits).fillna("").astype(str))
    return JudgeTrust(phrases, labelled[LABELLED_COLUMNS].reset_index(drop=True), judge.judge)


def require_labels(trust: JudgeTrust, metrics: list[str], tenant: str) -> None:
    """Refuse PPI when no judged metric of the run has enough labels scored by this judge, in one line."""
    judged = [m for m in metrics if is_judged(m)]
    if not judged or any(len(trust.pairs(m)) >= MIN_LABELS for m in judged):
        return
    raise MissingLabels(
        f"deciding on PPI needs at least {MIN_LABELS} labelled items scored by judge {trust.judge or 'of this run'} "
        f"on tenant {tenant} for one of {', '.join(judged)}; it has "
        f"{', '.join(f'{m} {len(trust.pairs(m))}' for m in judged)}: label audited items "
        f"(`rag-eval review export --audit RUN` then `review import`) or give a labels file, then run "
        f"`rag-eval calibrate --tenant {tenant}` with this judge"
    )


def trust_columns(
    metric: str,
    candidate: pd.DataFrame,
    paired: pd.DataFrame | None,
    trust: JudgeTrust,
    commits: tuple[str, str],
) -> dict:
    """The calibration phrase and PPI intervals of one metric's row. candidate: its measured scores;
    paired: the items measured by both runs (score, score_baseline), None without a baseline."""
    row: dict = {"judge_calibration": trust.phrase(metric), **dict.fromkeys(PPI_COLUMNS), "ppi_note": ""}
    pairs = trust.pairs(metric)
    if not is_judged(metric) or len(pairs) < MIN_LABELS:
        row["ppi_note"] = f"{len(pairs)} labels: no PPI interval" if is_judged(metric) else ""
        return row
    candidate_side = _side(pairs, commits[0])
    if candidate.empty:  # the candidate has no measured item: no mean to correct
        row["ppi_note"] = "no measured item: no PPI interval"
        return row
    mean = ppi_mean(
        candidate["score"].to_numpy(float),
        candidate_side["score"].to_numpy(float),
        candidate_side["label"].to_numpy(float),
    )
    # A metric's mean lies in [0, 1] and a delta in [-1, 1]: an interval is cut there.
    row.update(ppi_mean=_cut(mean.estimate, 0), ppi_mean_low=_cut(mean.low, 0), ppi_mean_high=_cut(mean.high, 0))
    if paired is not None and len(paired):
        baseline_side = _side(pairs, commits[1])
        delta = ppi_delta(
            (paired["score"] - paired["score_baseline"]).to_numpy(float),
            _errors(candidate_side),
            _errors(baseline_side),
        )
        row.update(
            ppi_delta=_cut(delta.estimate, -1), ppi_delta_low=_cut(delta.low, -1), ppi_delta_high=_cut(delta.high, -1)
        )
    row["ppi_note"] = _sources(pairs, commits)
    return row


def decide_by_ppi(row: dict, tolerance: float) -> tuple[str, str] | None:
    """The verdict a judged metric's PPI delta interval gives, or None to keep the judge's verdict."""
    if not is_judged(row["metric"]) or _missing(row.get("ppi_delta_low")):
        return None
    low, high = row["ppi_delta_low"], row["ppi_delta_high"]
    shown = f"PPI delta interval [{low:+.3f}, {high:+.3f}] against -{tolerance:g}"
    if high < -tolerance:
        return "regressed", f"{shown}: dropped beyond the tolerance"
    if low >= -tolerance:
        return "ok", f"{shown}: no drop beyond the tolerance"
    return "undecided", f"{shown}: it straddles the tolerance; more labels or items are needed to decide"


def _cut(value: float, lowest: float) -> float:
    return min(max(value, lowest), 1.0)


def _side(pairs: pd.DataFrame, commit: str) -> pd.DataFrame:
    """The labelled items that correct one side: that commit's own when there are enough, else all."""
    own = pairs[pairs["commit"] == commit] if commit else pairs.iloc[:0]
    return own if len(own) >= MIN_LABELS else pairs


def _errors(side: pd.DataFrame) -> dict[str, float]:
    return dict(zip(side["label_key"].astype(str), (side["label"] - side["score"]).astype(float)))


def _sources(pairs: pd.DataFrame, commits: tuple[str, str]) -> str:
    own = [commit for commit in commits if commit and (pairs["commit"] == commit).sum() >= MIN_LABELS]
    where = f"labels of {', '.join(own)} correct their own side" if own else "labels of other commits"
    return f"PPI on {len(pairs)} labels ({where})"


def _missing(value) -> bool:
    return value is None or bool(pd.isna(value)) or not np.isfinite(float(value))
