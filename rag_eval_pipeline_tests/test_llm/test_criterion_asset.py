"""A criterion metric of a team's own through the lineage, graded by the real local LLM server: every item
graded or unmeasured with why, the criterion's version in the judge's name, its calls counted as usage.
(SmolLM2-135M's grades are plumbing, not a judgement anyone should trust.)"""

import sys
import textwrap

import pytest
from dagster import AssetKey, materialize

from rag_eval_pipeline.definitions import ALL_ASSETS
from rag_eval_pipeline.evaluation.user_metrics import _imported, _loaded
from rag_eval_pipeline.resources import JudgeResource
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS

pytestmark = [pytest.mark.llm, pytest.mark.dagster]

CRITERION = "team_criteria.tone:polite"


@pytest.fixture
def team_criteria(tmp_path, monkeypatch):
    package = tmp_path / "team" / "team_criteria"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tone.py").write_text(
        textwrap.dedent(
            """
            from rag_eval_pipeline import criterion

            polite = criterion(
                "The answer is polite and speaks to the reader directly.",
                steps=["Read the answer.", "Judge its tone."],
                reads=["question", "answer"],
            )
            """
        )
    )
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "team_criteria")
    yield
    for module in [name for name in sys.modules if name.startswith("team_criteria")]:
        del sys.modules[module]
    _imported.cache_clear()
    _loaded.cache_clear()


def test_a_criterion_metric_is_graded_by_the_llm_judge_in_the_lineage(
    llama_server, acme_key, instance, resources, team_criteria
):
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
                "metric_scores": {"config": {"metrics": ["hit_rate", CRITERION]}},
            }
        },
    )
    assert result.success
    scores = result.output_for_node("metric_scores")
    graded = scores[scores["metric"] == CRITERION]
    golden = result.output_for_node("golden_set", "golden_set")
    assert len(graded) == len(golden) >= 1
    assert ((graded["status"] == "ok") | (graded["reason"] != "")).all()
    assert graded.loc[graded["status"] == "ok", "score"].isin([0.0, 0.25, 0.5, 0.75, 1.0]).all()
    (judge,) = set(scores["judge"])
    assert judge.startswith(f"llm:{llama_server.model}:decomposed:prompt-") and f"+{CRITERION}@criterion-" in judge

    metadata = instance.get_latest_materialization_event(AssetKey("metric_scores")).asset_materialization.metadata
    usage = metadata["judge_usage"].value
    assert usage["criterion"]["calls"] + usage["criterion"].get("cache_hits", 0) >= len(golden)
    assert usage["criterion"]["serves"] == CRITERION
