"""The golden set's great-expectations suite: the pure core, then the blocking Dagster check."""

# No `from __future__ import annotations`: the stub assets below declare a resource by annotation,
# which Dagster reads from the live function signature.

import pandas as pd
import pytest
from dagster import AssetOut, Output, asset, materialize, multi_asset

from rag_eval_pipeline.partitions import register_partition, tenant_version_partitions
from rag_eval_pipeline.resources.warehouse import WarehouseIOManager, WarehouseResource
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.checks import PLAN_TABLE, expected_types, golden_set_expectations
from rag_eval_pipeline.synthesis.expectations import (
    GOLD_CHUNKS,
    GOLDEN,
    check_golden_set,
    failures_markdown,
)
from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS
from rag_eval_pipeline.synthesis.versions import content_hash, latest_version, read_manifest

CHUNK_IDS = {"c1", "c2", "c3"}
ALL_TYPES = {"simple", "reasoning", "multi_context", "unanswerable"}

UNIQUE = "expect_column_values_to_be_unique"
NOT_NULL = "expect_column_values_to_not_be_null"
IN_SET = "expect_column_values_to_be_in_set"
LENGTHS = "expect_column_value_lengths_to_be_between"
COLUMNS = "expect_table_columns_to_match_set"
ROW_COUNT = "expect_table_row_count_to_be_between"
CONTAINS = "expect_column_distinct_values_to_contain_set"


def _item(qa_id, question_type="simple", gold=("c1",), **changes) -> dict:
    item = {
        "qa_id": qa_id,
        "question": f"What does the runbook say about step {qa_id}?",
        "ground_truth": "It says to page the on-call engineer.",
        "gold_chunk_ids": list(gold),
        "gold_contexts": [f"text of {c}" for c in gold],
        "question_type": question_type,
        "source_cluster": 0,
        "source_chunk_ids": list(gold) or ["c1"],
        "generator": "offline-template",
        "prompt_version": "v1",
        "template": "definition",
        "round_trip_rank": 1 if gold else -1,
        "grounded": True,
    }
    return {**item, **changes}


def _frame(items: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(items, columns=GOLDEN_COLUMNS)


@pytest.fixture
def good() -> pd.DataFrame:
    return _frame(
        [
            _item("q1", "simple", ("c1",)),
            _item("q2", "reasoning", ("c2",)),
            _item("q3", "multi_context", ("c1", "c3")),
            _item("q4", "unanswerable", ()),
        ]
    )


def _failed(report) -> set[tuple[str, str, str]]:
    return {(r.table, r.expectation, r.column) for r in report.failures}


def _only_failure(report):
    assert not report.success
    assert len(report.failures) == 1, failures_markdown(report)
    return report.failures[0]


# ---- the pure core ----------------------------------------------------------------------------


def test_a_good_golden_set_passes_every_expectation(good):
    report = check_golden_set(good, CHUNK_IDS, ALL_TYPES)
    assert report.success and not report.failures
    checked = {(r.table, r.expectation, r.column) for r in report.results}
    # Every property of the suite was evaluated, on both tables.
    assert {
        (GOLDEN, COLUMNS, ""),
        (GOLDEN, ROW_COUNT, ""),
        (GOLDEN, UNIQUE, "qa_id"),
        (GOLDEN, NOT_NULL, "question"),
        (GOLDEN, LENGTHS, "question"),
        (GOLDEN, IN_SET, "question_type"),
        (GOLDEN, CONTAINS, "question_type"),
        (GOLDEN, IN_SET, "grounded"),
        (GOLD_CHUNKS, IN_SET, "gold_chunk_id"),
        (GOLD_CHUNKS, NOT_NULL, "gold_chunk_id"),
    } <= checked
    assert failures_markdown(report) == "All expectations passed."


def test_a_duplicate_qa_id_fails_uniqueness_only(good):
    good.loc[1, "qa_id"] = "q1"
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.table, failure.expectation, failure.column) == (GOLDEN, UNIQUE, "qa_id")
    assert "q1" in failure.detail and "2 of 4" in failure.detail


def test_an_unknown_gold_chunk_id_fails_and_names_item_and_id(good):
    good.at[2, "gold_chunk_ids"] = ["c1", "ghost"]
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.table, failure.expectation, failure.column) == (GOLD_CHUNKS, IN_SET, "gold_chunk_id")
    assert "ghost" in failure.detail and "q3" in failure.detail


def test_an_answerable_item_needs_a_gold_chunk_but_an_unanswerable_one_does_not(good):
    assert check_golden_set(good, CHUNK_IDS, ALL_TYPES).success  # q4, unanswerable, has none
    good.at[0, "gold_chunk_ids"] = []
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.table, failure.expectation, failure.column) == (GOLD_CHUNKS, NOT_NULL, "gold_chunk_id")
    assert "q1" in failure.detail and "q4" not in failure.detail


def test_a_missing_column_fails_the_schema_only(good):
    failure = _only_failure(check_golden_set(good.drop(columns=["template"]), CHUNK_IDS, ALL_TYPES))
    assert (failure.table, failure.expectation) == (GOLDEN, COLUMNS)
    assert "missing" in failure.detail and "template" in failure.detail


def test_an_extra_column_fails_the_schema_too(good):
    failure = _only_failure(check_golden_set(good.assign(debug=1), CHUNK_IDS, ALL_TYPES))
    assert failure.expectation == COLUMNS and "debug" in failure.detail


def test_a_question_type_outside_the_known_types_fails(good):
    good.loc[0, "question_type"] = "trivia"
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, {"reasoning", "multi_context"}))
    assert (failure.table, failure.expectation, failure.column) == (GOLDEN, IN_SET, "question_type")
    assert "trivia" in failure.detail


def test_an_expected_type_missing_from_the_kept_items_fails_the_type_mix(good):
    without_multi = good[good["question_type"] != "multi_context"]
    assert check_golden_set(without_multi, CHUNK_IDS, {"simple", "reasoning"}).success
    failure = _only_failure(check_golden_set(without_multi, CHUNK_IDS, ALL_TYPES))
    assert (failure.expectation, failure.column) == (CONTAINS, "question_type")
    assert "multi_context" in failure.detail


def test_an_ungrounded_item_fails_groundedness(good):
    good.loc[1, "grounded"] = False
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.expectation, failure.column) == (IN_SET, "grounded")
    assert "q2" in failure.detail


def test_a_null_question_fails_non_null_only(good):
    good.loc[2, "question"] = None
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.table, failure.expectation, failure.column) == (GOLDEN, NOT_NULL, "question")
    assert "q3" in failure.detail


def test_a_too_short_question_fails_its_length(good):
    good.loc[0, "question"] = "Why?"
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    assert (failure.expectation, failure.column) == (LENGTHS, "question")


def test_an_empty_golden_set_fails_on_its_row_count(good):
    failure = _only_failure(check_golden_set(good.iloc[0:0], CHUNK_IDS, set()))
    assert failure.expectation == ROW_COUNT and "observed 0" in failure.detail


def test_a_frame_with_nothing_in_it_fails_without_crashing():
    report = check_golden_set(pd.DataFrame(), CHUNK_IDS, {"simple"})
    assert not report.success
    assert {(GOLDEN, COLUMNS, ""), (GOLDEN, ROW_COUNT, ""), (GOLD_CHUNKS, IN_SET, "gold_chunk_id")} <= _failed(report)


def test_min_items_is_a_floor_and_cannot_be_zero(good):
    failure = _only_failure(check_golden_set(good, CHUNK_IDS, ALL_TYPES, min_items=5))
    assert failure.expectation == ROW_COUNT and "observed 4" in failure.detail
    assert check_golden_set(good, CHUNK_IDS, ALL_TYPES, min_items=4).success
    with pytest.raises(ValueError, match="min_items"):
        check_golden_set(good, CHUNK_IDS, ALL_TYPES, min_items=0)


def test_list_columns_read_back_from_parquet_are_checked_the_same(good, tmp_path):
    """The IO manager hands the check numpy arrays, not lists, in gold_chunk_ids."""
    good.at[0, "gold_chunk_ids"] = ["ghost"]
    good.to_parquet(tmp_path / "golden.parquet", index=False)
    read_back = pd.read_parquet(tmp_path / "golden.parquet")
    assert not isinstance(read_back.at[0, "gold_chunk_ids"], list)
    failure = _only_failure(check_golden_set(read_back, CHUNK_IDS, ALL_TYPES))
    assert failure.expectation == IN_SET and "ghost" in failure.detail


def test_failures_render_as_a_markdown_table(good):
    good.loc[1, "qa_id"] = "q1"
    good.loc[1, "grounded"] = False
    markdown = failures_markdown(check_golden_set(good, CHUNK_IDS, ALL_TYPES))
    lines = markdown.splitlines()
    assert lines[0] == "| table | expectation | column | detail |"
    assert len(lines) == 4  # header, rule, two failures
    assert any(UNIQUE in line and "qa_id" in line for line in lines[2:])
    assert any(IN_SET in line and "grounded" in line for line in lines[2:])


def test_the_suite_is_quiet_and_writes_no_files(good, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    check_golden_set(good, CHUNK_IDS, ALL_TYPES)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""  # no progress bars, no log lines
    assert list(tmp_path.iterdir()) == []  # an ephemeral context: no great_expectations/ folder


# ---- the Dagster check ------------------------------------------------------------------------


def test_expected_types_are_the_types_planned_in_earnest():
    assert expected_types(_plan({})) == set()  # an empty plan: nothing is required
    assert expected_types(_plan({"simple": 5, "reasoning": 3, "multi_context": 2})) == {"simple", "reasoning"}


def _plan(planned: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_type": pd.Series(list(planned), dtype=object),
            "requested": list(planned.values()),
            "planned": list(planned.values()),
            "generated": list(planned.values()),
            "kept": list(planned.values()),
            "note": [""] * len(planned),
        }
    )


def _stub_assets(golden: pd.DataFrame, plan=None):
    """document_chunks -> golden_set + its plan -> downstream (a stand-in for the audit), partitioned like
    the project; no plan is an empty one."""

    @asset(partitions_def=tenant_version_partitions)
    def document_chunks() -> pd.DataFrame:
        return pd.DataFrame({"chunk_id": sorted(CHUNK_IDS), "text": ["a", "b", "c"]})

    @multi_asset(outs={"golden_set": AssetOut(), PLAN_TABLE: AssetOut()}, partitions_def=tenant_version_partitions)
    def golden_set(document_chunks: pd.DataFrame):
        yield Output(golden, output_name="golden_set")
        yield Output(_plan({}) if plan is None else plan, output_name=PLAN_TABLE)

    @asset(partitions_def=tenant_version_partitions)
    def downstream(golden_set: pd.DataFrame) -> pd.DataFrame:
        return golden_set[["qa_id"]]

    return [document_chunks, golden_set, downstream]


def _materialize(golden, instance, root, plan=None):
    key = register_partition(instance, "acme", "v1")
    result = materialize(
        [*_stub_assets(golden, plan), golden_set_expectations],
        partition_key=key,
        instance=instance,
        resources={"io_manager": WarehouseIOManager(root=str(root)), "warehouse": WarehouseResource(root=str(root))},
        raise_on_error=False,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    materialized = {event.asset_key.to_user_string() for event in result.get_asset_materialization_events()}
    return result, evaluation, materialized, key


@pytest.mark.dagster
def test_a_good_golden_set_passes_the_check_and_the_run_goes_on(good, instance, tmp_path):
    result, evaluation, materialized, key = _materialize(good, instance, tmp_path)
    assert result.success
    assert evaluation.check_name == "golden_set_expectations" and evaluation.passed
    assert evaluation.partition == str(key)  # one result per (tenant, dataset_version)
    assert evaluation.metadata["items"].value == 4 and evaluation.metadata["failed_expectations"].value == 0
    assert materialized == {"document_chunks", "golden_set", PLAN_TABLE, "downstream"}
    assert Warehouse(tmp_path).exists("acme", "v1", "downstream")
    # Passing the check is what publishes the golden set.
    manifest = read_manifest(Warehouse(tmp_path), "acme", "v1")
    assert manifest is not None and manifest.content_hash == content_hash(good)
    assert latest_version(Warehouse(tmp_path), "acme") == "v1"
    assert manifest.content_hash[:12] in evaluation.metadata["published"].value


@pytest.mark.dagster
def test_a_bad_golden_set_fails_the_check_and_blocks_what_is_downstream(good, instance, tmp_path):
    good.loc[1, "qa_id"] = "q1"
    result, evaluation, materialized, _ = _materialize(good, instance, tmp_path)
    assert not result.success
    assert not evaluation.passed and evaluation.severity.value == "ERROR"
    assert evaluation.metadata["failed_expectations"].value == 1
    assert UNIQUE in evaluation.metadata["failures"].value
    assert materialized == {"document_chunks", "golden_set", PLAN_TABLE}  # the check ran after golden_set...
    assert not Warehouse(tmp_path).exists("acme", "v1", "downstream")  # ...and stopped this
    # ...and a golden set that fails its check is never published: no later gate can pick it.
    assert Warehouse(tmp_path).exists("acme", "v1", "golden_set")
    assert read_manifest(Warehouse(tmp_path), "acme", "v1") is None
    assert latest_version(Warehouse(tmp_path), "acme") is None
    assert evaluation.metadata["published"].value.startswith("no")


@pytest.mark.dagster
def test_the_check_requires_the_types_the_plan_asked_for(good, instance, tmp_path):
    without_multi = good[good["question_type"] != "multi_context"]
    _, evaluation, materialized, _ = _materialize(
        without_multi, instance, tmp_path, plan=_plan({"simple": 4, "multi_context": 3})
    )
    assert not evaluation.passed and "downstream" not in materialized
    assert evaluation.metadata["expected_types"].value == "multi_context, simple"
    assert "multi_context" in evaluation.metadata["failures"].value


@pytest.mark.dagster
def test_a_type_planned_too_thinly_is_not_required(good, instance, tmp_path):
    without_multi = good[good["question_type"] != "multi_context"]
    _, evaluation, materialized, _ = _materialize(
        without_multi, instance, tmp_path, plan=_plan({"simple": 4, "multi_context": 2})
    )
    assert evaluation.passed and "downstream" in materialized


def test_the_code_location_runs_the_check_in_the_jobs_that_build_the_golden_set():
    from rag_eval_pipeline.definitions import defs

    check_key = golden_set_expectations.check_keys
    for name, included in (("full_pipeline", True), ("synthesis", True), ("audit", False)):
        job_checks = defs.resolve_job_def(name).asset_layer.asset_graph.asset_check_keys
        assert (check_key <= job_checks) is included, name
