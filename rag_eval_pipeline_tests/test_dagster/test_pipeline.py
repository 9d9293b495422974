"""The whole lineage materialized in process for one partition, and the gate it ends in."""

import json

import pandas as pd
import pytest
from dagster import materialize

from rag_eval_pipeline.core.metrics.registry import BUILTIN_METRICS
from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.reporting.baselines import FIRST_RUN
from rag_eval_pipeline.reporting.compare import BASELINE_PROPOSED, BLOCK, PASS
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.local_baselines import LocalBaselineStore
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS

pytestmark = [pytest.mark.dagster]

EVERYTHING = None
AUDIT = ["candidate_outputs", "metric_scores", "regression_report"]
# The golden set's blocking check publishes it: without it no candidate can be audited.
LINEAGE = [*ALL_ASSETS, *SYNTHESIS_CHECKS]


def _run(selection, key, instance, resources, candidate="reference", commit="c1", timeout_s=2.0, **report):
    return materialize(
        LINEAGE,
        selection=selection,
        partition_key=key,
        instance=instance,
        resources=resources,
        run_config={
            "ops": {
                "candidate_outputs": {"config": {"candidate": candidate, "commit": commit, "timeout_s": timeout_s}},
                # As `rag-eval run` does: the first audit of the version becomes its baseline.
                "regression_report": {"config": {"first_audit_is_baseline": True, **report}},
            }
        },
    )


def test_full_lineage_materializes_every_stage(acme_key, instance, resources, tenant_dirs):
    result = _run(EVERYTHING, acme_key, instance, resources)
    assert result.success
    warehouse = Warehouse(tenant_dirs[1])
    read = lambda name: warehouse.read("acme", "v1", name)

    documents, rejected = read("raw_documents"), read("rejected_documents")
    assert sorted(documents["format"]) == ["markdown", "markdown", "pdf"]
    assert rejected["path"].tolist() == ["broken.pdf"] and "corrupt" in rejected["reason"][0]

    chunks = read("document_chunks")
    assert set(chunks["doc_id"]) == set(documents["doc_id"])
    assert chunks["chunk_id"].is_unique

    clusters = read("chunk_clusters")
    assert set(clusters["chunk_id"]) == set(chunks["chunk_id"])

    golden = read("golden_set")
    assert len(golden) >= 10
    assert {c for ids in golden["gold_chunk_ids"] for c in ids} <= set(chunks["chunk_id"])

    # Every table is an asset materialized once by the run, its row count in the metadata.
    tables = {}
    for event in result.get_asset_materialization_events():
        name = event.asset_key.to_user_string()
        assert name not in tables, f"{name} materialized twice"
        tables[name] = event.materialization.metadata
    assert set(tables) == {asset_key.to_user_string() for assets in ALL_ASSETS for asset_key in assets.keys}
    for name in (
        "raw_documents",
        "rejected_documents",
        "synthetic_qa",
        "generation_failures",
        "generation_plan",
        "golden_set",
        "rejected_qa",
        "synthesis_plan",
    ):
        assert tables[name]["dagster/row_count"].value == len(read(name)), name

    # Generation plans; verification adds what it kept, and every candidate is kept or rejected once.
    generation_plan, plan = read("generation_plan"), read("synthesis_plan")
    assert plan.columns.tolist() == ["question_type", "requested", "planned", "generated", "kept", "note"]
    assert plan.drop(columns="kept").equals(generation_plan)
    assert plan["kept"].sum() == len(golden)
    rejected_qa, failures = read("rejected_qa"), read("generation_failures")
    assert len(golden) + len(rejected_qa) == len(read("synthetic_qa")) + len(failures)

    # The audit tables are the run's own, under its commit.
    audit = warehouse.audit_dir("acme", "v1", "c1", result.run_id)
    assert not warehouse.exists("acme", "v1", "candidate_outputs")
    read_audit = lambda name: pd.read_parquet(audit / f"{name}.parquet")
    outputs = read_audit("candidate_outputs")
    assert (outputs["status"] == "ok").all() and (outputs["commit"] == "c1").all()

    scores = read_audit("metric_scores")
    assert len(scores) == len(golden) * len(BUILTIN_METRICS)
    measured = scores[scores["status"] == "ok"]["score"]
    assert measured.between(0, 1).all() and not measured.isna().any()
    evidence = json.loads(scores[scores["metric"] == "faithfulness"]["evidence"].iloc[0])
    assert evidence["statements"] and {"statement", "verdict"} <= set(evidence["statements"][0])

    assert set(scores["judge"]) == {"offline-support-v3"} and set(scores["k"]) == {5}

    report = read_audit("regression_report")
    assert set(report["metric"]) == set(BUILTIN_METRICS) and set(report["commit"]) == {"c1"}
    assert (report["verdict_overall"] == BASELINE_PROPOSED).all()
    baselines = LocalBaselineStore(warehouse)
    assert (baselines.current("acme", "v1").commit, baselines.current("acme", "v1").reason) == ("c1", FIRST_RUN)

    materialization = instance.get_latest_materialization_event(
        __import__("dagster").AssetKey("regression_report")
    ).asset_materialization
    assert "Regression report: acme / v1 / commit c1" in materialization.metadata["report"].value
    assert materialization.partition == acme_key
    html_path = materialization.metadata["report_html_path"].value
    assert html_path == str(audit / "regression_report.html") and "<svg" in open(html_path, encoding="utf-8").read()
    assert html_path in materialization.metadata["report"].value  # the CLI prints the Markdown, paths included
    assert set(report[["delta_ci_low", "delta_ci_high", "tolerance"]].columns) == {
        "delta_ci_low",
        "delta_ci_high",
        "tolerance",
    }
    assert baselines.audited("acme", "v1", "c1")[1]["qa_id"].tolist() == outputs["qa_id"].tolist()


def test_regressed_candidate_is_blocked_and_reference_passes(
    synthesized_acme, acme_key, instance, resources, tenant_dirs
):
    assert _run(AUDIT, acme_key, instance, resources, commit="base").success

    same = _run(AUDIT, acme_key, instance, resources, commit="same-again")
    verdict = same.output_for_node("regression_report")["verdict_overall"].iloc[0]
    assert verdict == PASS

    worse = _run(
        AUDIT, acme_key, instance, resources, candidate="rag_eval_pipeline_tests.candidates:no_retrieval", commit="bad"
    )
    report = worse.output_for_node("regression_report").set_index("metric")
    assert report["verdict_overall"].iloc[0] == BLOCK
    assert report.loc["hit_rate", "verdict"] == "regressed"
    assert report.loc["hit_rate", "delta"] < -0.05
    assert report.loc["faithfulness", "verdict"] == "regressed"
    assert report.loc["hit_rate", "delta_ci_high"] < 0  # the whole interval is a drop
    markdown = (
        Warehouse(tenant_dirs[1]).audit_dir("acme", "v1", "bad", worse.run_id) / "regression_report.md"
    ).read_text()
    assert "## Worst regressed items" in markdown and "(not stored)" not in markdown  # baseline answers kept
    # The baseline is still the first candidate: a blocked candidate is not promoted.
    baselines = LocalBaselineStore(Warehouse(tenant_dirs[1]))
    assert baselines.current("acme", "v1").commit == "base"
    assert baselines.audited_commits("acme", "v1") == ["bad", "base", "same-again"]  # every audit is kept


def test_a_pass_on_main_becomes_the_baseline_and_an_older_commit_can_be_asked_for(
    synthesized_acme, acme_key, instance, resources, tenant_dirs
):
    baselines = LocalBaselineStore(Warehouse(tenant_dirs[1]))
    assert _run(AUDIT, acme_key, instance, resources, commit="base").success
    on_branch = _run(AUDIT, acme_key, instance, resources, commit="pr-1", branch="feature-x")
    assert on_branch.output_for_node("regression_report")["promoted_to_baseline"].iloc[0] == ""
    assert baselines.current("acme", "v1").commit == "base"

    on_main = _run(AUDIT, acme_key, instance, resources, commit="merged", branch="main")
    assert on_main.output_for_node("regression_report")["promoted_to_baseline"].iloc[0] == "passed the gate on main"
    assert [p.commit for p in baselines.history("acme", "v1")] == ["base", "merged"]

    worse = _run(
        AUDIT,
        acme_key,
        instance,
        resources,
        candidate="rag_eval_pipeline_tests.candidates:no_retrieval",
        commit="bad",
        branch="main",
    )
    assert worse.output_for_node("regression_report")["verdict_overall"].iloc[0] == BLOCK
    assert baselines.current("acme", "v1").commit == "merged"  # a blocked candidate on main is not promoted

    # Compared with an explicitly named older commit, the degraded one is the baseline and the reference improves;
    # the degraded commit retrieved nothing, so contextual relevancy has nothing to compare with there.
    against_bad = _run(AUDIT, acme_key, instance, resources, commit="fix", baseline_commit="bad", branch="main")
    report = against_bad.output_for_node("regression_report").set_index("metric")
    assert set(report["baseline_commit"]) == {"bad"} and report.loc["hit_rate", "delta"] > 0.05
    assert report["verdict_overall"].iloc[0] == PASS
    assert report.loc["contextual_relevancy", "verdict"] == "no baseline"
    assert baselines.current("acme", "v1").commit == "merged"  # comparing with a commit does not promote it


def test_an_unaudited_baseline_commit_fails_the_report(synthesized_acme, acme_key, instance, resources):
    assert _run(AUDIT, acme_key, instance, resources, commit="base").success
    result = materialize(
        LINEAGE,
        selection=AUDIT,
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        raise_on_error=False,
        run_config={"ops": {"regression_report": {"config": {"baseline_commit": "ghost"}}}},
    )
    assert not result.success
    assert "'ghost' was never audited on acme/v1" in _failure_text(result)


@pytest.mark.parametrize(
    "candidate, timeout_s, reason",
    [
        ("rag_eval_pipeline_tests.candidates:crashes", 2.0, "vector store connection refused"),
        # Every golden item waits out the timeout in turn, so it is short here; `hangs` sleeps 30 s, so
        # a timeout that stopped working would leave the items answered ("ok") and fail the test.
        ("rag_eval_pipeline_tests.candidates:hangs", 0.2, "timed out after 0.2 s"),
    ],
)
def test_failing_candidate_is_recorded_not_crashed(
    synthesized_acme, acme_key, instance, resources, candidate, timeout_s, reason
):
    assert _run(AUDIT, acme_key, instance, resources, commit="base").success
    result = _run(AUDIT, acme_key, instance, resources, candidate=candidate, commit="broken", timeout_s=timeout_s)
    assert result.success
    outputs = result.output_for_node("candidate_outputs")
    assert (outputs["status"] == "failed").all()
    assert outputs["error"].str.contains(reason, regex=False).all()
    assert (outputs["latency_s"] < 10).all()  # abandoned, never waited for
    scores = result.output_for_node("metric_scores")
    assert (scores["status"] == "unmeasured").all()
    assert scores["reason"].str.startswith("candidate failed").all()
    report = result.output_for_node("regression_report")
    assert report["verdict_overall"].iloc[0] == BLOCK  # coverage fell to zero
    assert report["coverage"].eq(0).all()


def test_unregistered_partition_is_refused(instance, resources):
    from rag_eval_pipeline.partitions import partition_key

    with pytest.raises(Exception, match="(?i)partition"):
        materialize(
            ALL_ASSETS,
            selection=["raw_documents", "rejected_documents"],
            partition_key=partition_key("ghost", "v1"),
            instance=instance,
            resources=resources,
        )


def test_tenant_without_documents_folder_fails_clearly(instance, resources):
    from rag_eval_pipeline.partitions import register_partition

    key = register_partition(instance, "nofolder", "v1")
    result = materialize(
        ALL_ASSETS,
        selection=["raw_documents", "rejected_documents"],
        partition_key=key,
        instance=instance,
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success
    assert "unknown tenant 'nofolder'" in _failure_text(result)


def test_unimportable_candidate_fails_the_step_with_its_name(synthesized_acme, acme_key, instance, resources):
    result = materialize(
        LINEAGE,
        selection=AUDIT,
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        raise_on_error=False,
        run_config={"ops": {"candidate_outputs": {"config": {"candidate": "no_such_module:answer"}}}},
    )
    assert not result.success
    assert "cannot import candidate module 'no_such_module'" in _failure_text(result)


def _failure_text(result) -> str:
    return "\n".join(e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure)


def test_scores_made_with_another_k_or_metric_set_are_never_compared_as_they_are(
    synthesized_acme, acme_key, instance, resources
):
    assert _run(AUDIT, acme_key, instance, resources, commit="base").success

    def audit(commit: str, scoring: dict, rescore: bool):
        return materialize(
            LINEAGE,
            selection=AUDIT,
            partition_key=acme_key,
            instance=instance,
            resources=resources,
            raise_on_error=False,
            run_config={
                "ops": {
                    "candidate_outputs": {"config": {"commit": commit}},
                    "metric_scores": {"config": scoring},
                    "regression_report": {"config": {"rescore_baseline": rescore}},
                }
            },
        )

    refused = audit("k3", {"k": 3}, rescore=False)
    assert not refused.success
    assert "k: candidate 3, baseline 5" in _failure_text(refused)

    rescored = audit("k3-again", {"k": 3, "metrics": ["hit_rate", "mrr"]}, rescore=True)
    assert rescored.success
    report = rescored.output_for_node("regression_report")
    assert set(report["metric"]) == {"hit_rate", "mrr"}
    source = report["baseline_source"].iloc[0]
    assert (
        "re-scored" in source
        and "k: candidate 3, baseline 5" in source
        and "metrics: candidate hit_rate, mrr" in source
    )
    assert report["verdict_overall"].iloc[0] == PASS and (report["paired_items"] > 0).all()
