"""synthetic_qa with the LLM generator, through the judge resource's server (the real local llama.cpp)."""

import pytest
from dagster import AssetKey, materialize

from rag_eval_pipeline.automation.jobs import SYNTHESIS_ASSETS
from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.resources import JudgeResource
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.items import QUESTION_TYPES, REFUSAL

pytestmark = [pytest.mark.llm, pytest.mark.dagster]

SYNTHESIS = SYNTHESIS_ASSETS  # every table of the synthesis track: a step writing several writes them all


def test_llm_generator_writes_every_type_or_says_why(llama_server, acme_key, instance, resources, tenant_dirs):
    # Generation by the LLM server; verification stays with the offline judge (kind "offline").
    resources = {
        **resources,
        "judge": JudgeResource(
            embedder=resources["embedder"],
            kind="offline",
            base_url=llama_server.base_url,
            model=llama_server.model,
            response_format="json_object_schema",
            concurrency=1,
        ),
    }
    result = materialize(
        ALL_ASSETS,
        selection=SYNTHESIS,
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        run_config={
            "ops": {
                "synthetic_qa": {
                    "config": {"generator": "llm", "n_items": 4, "type_mix": {t: 1.0 for t in QUESTION_TYPES}}
                }
            }
        },
    )
    assert result.success

    warehouse = Warehouse(tenant_dirs[1])
    items = warehouse.read("acme", "v1", "synthetic_qa")
    failures = warehouse.read("acme", "v1", "generation_failures")
    plan = warehouse.read("acme", "v1", "synthesis_plan").set_index("question_type")
    # Every type was planned (the LLM writes all four), and every try is an item or a recorded failure.
    assert (plan["planned"] == 1).all()
    assert len(items) + len(failures) >= 4
    assert len(items) == plan["generated"].sum()
    assert (failures["reason"].str.len() > 0).all() and (failures["stage"] == "generation").all()
    assert set(items["generator"]) <= {f"llm:{llama_server.model}"}
    assert (items.loc[items["question_type"] == "unanswerable", "ground_truth"] == REFUSAL).all()

    golden = warehouse.read("acme", "v1", "golden_set")
    rejected = warehouse.read("acme", "v1", "rejected_qa")
    assert len(golden) + len(rejected) == len(items) + len(failures)  # nothing lost
    metadata = instance.get_latest_materialization_event(AssetKey("synthetic_qa")).asset_materialization.metadata
    assert metadata["generator"].value == f"llm:{llama_server.model}"
    assert metadata["generator_usage"].value["calls"] + metadata["generator_usage"].value["cache_hits"] >= 4
