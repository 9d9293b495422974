"""The synthesis track in Dagster: published golden sets are immutable, new versions take changes,
the type mix and generator are configurable, and the great-expectations check runs per partition."""

import pytest
from dagster import DagsterInvalidConfigError, materialize

from rag_eval_pipeline.automation.jobs import SYNTHESIS_ASSETS
from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS
from rag_eval_pipeline.synthesis.versions import diff_versions, read_manifest

pytestmark = [pytest.mark.dagster]

SYNTHESIS = SYNTHESIS_ASSETS  # every table of the synthesis track: a step writing several writes them all

NEW_DOCUMENT = """# Cold Chain Handling

Refrigerated trailers at Halcyon Freight are pre-cooled to 4 degrees Celsius for 45 minutes before loading.
A temperature logger records the trailer temperature every 5 minutes during every refrigerated journey.
Pharmaceutical shipments that exceed 8 degrees Celsius for more than 30 minutes are quarantined at the destination depot.
"""


def _synthesize(key, instance, resources, **synthesis_config):
    return materialize(
        [*ALL_ASSETS, *SYNTHESIS_CHECKS],
        selection=SYNTHESIS,
        partition_key=key,
        instance=instance,
        resources=resources,
        raise_on_error=False,
        run_config={"ops": {"synthetic_qa": {"config": synthesis_config}}},
    )


def _failure_text(result) -> str:
    return "\n".join(e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure)


def test_published_golden_set_is_immutable_and_a_new_version_takes_the_change(
    acme_key, instance, resources, tenant_dirs
):
    documents_root, warehouse_root = tenant_dirs
    warehouse = Warehouse(warehouse_root)

    first = _synthesize(acme_key, instance, resources)
    assert first.success
    golden_v1 = warehouse.read("acme", "v1", "golden_set")
    manifest = read_manifest(warehouse, "acme", "v1")
    assert manifest.n_items == len(golden_v1) > 0 and manifest.source == "synthesis"
    [evaluation] = first.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.asset_check_key.name == "golden_set_expectations"

    # Same documents, same golden set: re-running is allowed and changes nothing.
    assert _synthesize(acme_key, instance, resources).success
    assert read_manifest(warehouse, "acme", "v1") == manifest

    # New documents would change the published set: refused, and the published table is untouched.
    (documents_root / "acme" / "cold-chain.md").write_text(NEW_DOCUMENT, encoding="utf-8")
    changed = _synthesize(acme_key, instance, resources, n_items=60)
    assert not changed.success
    assert "published" in _failure_text(changed) and "new version" in _failure_text(changed)
    assert warehouse.read("acme", "v1", "golden_set")["qa_id"].tolist() == golden_v1["qa_id"].tolist()

    # A new version takes them, and the diff shows what changed.
    v2 = register_partition(instance, "acme", "v2")
    assert _synthesize(v2, instance, resources, n_items=60).success
    golden_v2 = warehouse.read("acme", "v2", "golden_set")
    diff = diff_versions(golden_v1, golden_v2)
    added = set(diff.loc[diff["change"] == "added", "qa_id"])
    assert added == set(golden_v2["qa_id"]) - set(golden_v1["qa_id"]) and added
    new_doc_items = golden_v2[
        golden_v2["source_chunk_ids"].map(lambda ids: any(i.startswith("cold-chain.md") for i in ids))
    ]
    assert len(new_doc_items) and set(new_doc_items["qa_id"]) <= added


def test_type_mix_and_size_come_from_config(acme_key, instance, resources, tenant_dirs):
    result = _synthesize(acme_key, instance, resources, n_items=6, type_mix={"simple": 1.0, "unanswerable": 1.0})

    assert result.success
    warehouse = Warehouse(tenant_dirs[1])
    synthetic = warehouse.read("acme", "v1", "synthetic_qa")
    assert synthetic["question_type"].value_counts().to_dict() == {"simple": 3, "unanswerable": 3}
    plan = warehouse.read("acme", "v1", "synthesis_plan").set_index("question_type")
    assert (
        plan.loc["simple", "planned"] == 3
        and plan.loc["unanswerable", "kept"]
        == (warehouse.read("acme", "v1", "golden_set")["question_type"] == "unanswerable").sum()
    )


def test_reasoning_asked_of_the_offline_generator_is_recorded_as_moved(acme_key, instance, resources, tenant_dirs):
    result = _synthesize(acme_key, instance, resources, n_items=4, type_mix={"reasoning": 1.0, "simple": 1.0})

    assert result.success
    plan = Warehouse(tenant_dirs[1]).read("acme", "v1", "synthesis_plan").set_index("question_type")
    assert (plan.loc["reasoning", "requested"], plan.loc["reasoning", "planned"]) == (2, 0)
    assert "cannot write" in plan.loc["reasoning", "note"]
    assert plan.loc["simple", "planned"] == 4


def test_llm_generator_without_a_server_fails_with_what_to_set(acme_key, instance, resources):
    result = _synthesize(acme_key, instance, resources, generator="llm")

    assert not result.success
    assert "RAG_EVAL_JUDGE_BASE_URL" in _failure_text(result)


@pytest.mark.parametrize("generator", ["gpt", ""])
def test_unknown_generator_is_refused_at_launch(acme_key, instance, resources, generator):
    # A Literal config field: Dagster refuses the run before any step, so nothing is embedded for nothing.
    with pytest.raises(DagsterInvalidConfigError, match="generator"):
        _synthesize(acme_key, instance, resources, generator=generator)
    assert not Warehouse(resources["warehouse"].root).exists("acme", "v1", "document_chunks")
