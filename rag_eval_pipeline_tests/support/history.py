"""Audits stored without a Dagster run, as the regression_report asset stores them, for the history's tests and
benchmark: scores made up per metric, compared with the version's current baseline by the real `compare`,
the real report built and written through the store's own methods, the audit archived, promotions recorded.

`store_audit` runs one; `store_audits` a sequence of them. Works on any ResultsStore/BaselineStore pair (the
local warehouse, or the results database in production mode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline.reporting.baselines import FIRST_RUN, passed_on
from rag_eval_pipeline.reporting.compare import PASS, analyse, compare
from rag_eval_pipeline.reporting.report import Audit, Outcome, build_report
from rag_eval_pipeline.stores.protocols import BaselineStore, ResultsStore

METRICS = (
    "faithfulness",
    "answer_relevance",
    "context_recall",
    "context_precision",
    "contextual_relevancy",
    "answer_correctness",
    "hit_rate",
    "mrr",
)
OFFLINE_JUDGE = "offline-support-v3"
ITEMS = 10


@dataclass(frozen=True)
class Planned:
    """One audit to store: the commit, each metric's mean (scores are that value on every item, so the means are
    exact), and what happens around it."""

    commit: str
    means: dict[str, float]
    run_id: str = ""
    judge: str = OFFLINE_JUDGE
    promote: bool | str = False  # True: promote as the gate would on main when it passes; a str: that reason
    rescored: bool = False  # say the baseline was re-scored (as a run with another judge does)
    tokens: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # metric -> (calls, prompt, completion)
    rescoring: tuple[int, int, int] = (0, 0, 0)


def scores_frame(commit: str, means: dict[str, float], judge: str = OFFLINE_JUDGE, items: int = ITEMS) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "qa_id": f"q{item}",
                "metric": metric,
                "score": float(mean),
                "status": "ok",
                "reason": "",
                "evidence": "{}",
                "judge": judge,
                "k": 5,
                "commit": commit,
            }
            for item in range(items)
            for metric, mean in means.items()
        ]
    )


def outputs_frame(commit: str, items: int = ITEMS) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qa_id": [f"q{item}" for item in range(items)],
            "question": [f"question {item}?" for item in range(items)],
            "answer": f"answer of {commit}",
            "status": "ok",
            "commit": commit,
        }
    )


def store_audit(
    results: ResultsStore, baselines: BaselineStore, tenant: str, version: str, planned: Planned, number: int = 0
) -> str:
    """Store one audit as regression_report does; its run id."""
    run_id = planned.run_id or f"run-{number:04d}-" + re.sub(r"[^A-Za-z0-9_-]", "-", planned.commit[:12])
    scores, outputs = scores_frame(planned.commit, planned.means, planned.judge), outputs_frame(planned.commit)
    current = baselines.current(tenant, version)
    baseline = baselines.audited(tenant, version, current.commit, current.run_id)[0] if current else None
    source = f"current baseline since {current.promoted_at}: {current.reason}" if current else "none yet"
    if planned.rescored and current:
        source += "; re-scored with this run's judge (it was scored differently: judge: candidate x, baseline y)"
    comparison = compare(scores, baseline, commits=(planned.commit, current.commit if current else ""))
    promotion = planned.promote if isinstance(planned.promote, str) else None
    if planned.promote is True:
        promotion = FIRST_RUN if current is None else (passed_on("main") if comparison.verdict == PASS else None)
    tokens = None
    if planned.tokens or planned.rescoring != (0, 0, 0):
        per_metric = {metric: cost.TokenCount(*planned.tokens.get(metric, (0, 0, 0))) for metric in planned.means}
        tokens = cost.RunTokens(per_metric, rescoring=cost.TokenCount(*planned.rescoring))
    elif planned.judge == OFFLINE_JUDGE:
        tokens = cost.RunTokens({metric: cost.TokenCount() for metric in planned.means})
    outcome = Outcome(
        current.commit if current else "",
        source,
        comparison,
        analyse(comparison, scores, baseline),
        promotion,
        tokens,
    )
    folder = results.report_location(tenant, version, planned.commit, run_id)
    audit = Audit(tenant, version, planned.commit, run_id, folder, planned.judge)
    report = build_report(audit, outcome)
    for name, frame in (("metric_scores", scores), ("candidate_outputs", outputs)):
        results.write_audit_table(tenant, version, planned.commit, run_id, name, frame)
    results.write_report(tenant, version, planned.commit, run_id, report.stored(), {"tolerances": {}})
    results.write_audit_table(tenant, version, planned.commit, run_id, "regression_report", report.table)
    baselines.mark_complete(tenant, version, planned.commit, run_id)
    if promotion:
        baselines.promote(tenant, version, planned.commit, promotion, "main", run_id)
    return run_id


def store_audits(
    results: ResultsStore, baselines: BaselineStore, tenant: str, version: str, plan: list[Planned]
) -> list[str]:
    return [store_audit(results, baselines, tenant, version, planned, number) for number, planned in enumerate(plan)]


def publish_version(results: ResultsStore, tenant: str, version: str) -> None:
    """A published golden-set manifest and table for the version, so that it is the tenant's latest."""
    import json
    from datetime import datetime, timezone

    from rag_eval_pipeline.stores.layout import MANIFEST_FILE

    golden = outputs_frame("golden")[["qa_id", "question"]].assign(ground_truth="g", gold_chunk_ids=[["c#0"]] * ITEMS)
    results.write(tenant, version, "golden_set", golden)
    manifest = {
        "tenant": tenant,
        "dataset_version": version,
        "content_hash": "0" * 64,
        "n_items": ITEMS,
        "counts_by_type": {"simple": ITEMS},
        "published_at": datetime.now(timezone.utc).isoformat(),
        "source": "synthesis",
        "parent_version": None,
    }
    results.write_text(tenant, version, MANIFEST_FILE, json.dumps(manifest))
