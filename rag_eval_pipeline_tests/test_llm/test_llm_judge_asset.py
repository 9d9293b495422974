"""metric_scores with the judge resource pointed at the real local LLM server, through Dagster."""

import pytest
from dagster import AssetKey, materialize

from rag_eval_pipeline.core.judging.llm_judge import prompt_version
from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.resources import JudgeResource
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS

pytestmark = [pytest.mark.llm, pytest.mark.dagster]


def test_metric_scores_asset_uses_the_llm_judge_and_reports_usage(llama_server, acme_key, instance, resources):
    resources = {
        **resources,
        "judge": JudgeResource(
            embedder=resources["embedder"],
            kind="llm",
            base_url=llama_server.base_url,
            model=llama_server.model,
            response_format="json_object_schema",
            concurrency=2,
            timeout_s=300.0,  # a shared CPU server
        ),
    }
    result = materialize(
        [*ALL_ASSETS, *SYNTHESIS_CHECKS],
        partition_key=acme_key,
        instance=instance,
        resources=resources,
        run_config={
            "ops": {
                "synthetic_qa": {"config": {"n_items": 3}},
                "metric_scores": {"config": {"metrics": ["hit_rate", "faithfulness"]}},
            }
        },
    )
    assert result.success
    scores = result.output_for_node("metric_scores")
    assert set(scores["judge"]) == {f"llm:{llama_server.model}:decomposed:prompt-{prompt_version(3)}"}
    faithfulness = scores[scores["metric"] == "faithfulness"]
    # The LLM judge also verified the golden set (SmolLM2 is near chance there): one row per kept item.
    golden = result.output_for_node("golden_set", "golden_set")
    assert len(faithfulness) == len(golden) >= 1
    assert ((faithfulness["status"] == "ok") | (faithfulness["reason"] != "")).all()

    metadata = instance.get_latest_materialization_event(AssetKey("metric_scores")).asset_materialization.metadata
    usage = metadata["judge_usage"].value
    assert usage["answer_statements"]["calls"] >= len(golden) and usage["answer_statements"]["prompt_tokens"] > 0
    assert "faithfulness" in usage["answer_statements"]["serves"]
