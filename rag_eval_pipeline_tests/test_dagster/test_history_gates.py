"""Real gates, then their trends and history: the numeric metadata metric_scores and regression_report record
equal the report's numbers, an LLM judge's tokens (and cost) reach the report per metric and per run, and
`rag-eval history` draws the audits. The LLM judge is the scripted FakeOpenAIServer (named as a fake), which
bills 10 prompt and 5 completion tokens per call.

The gates and the history run in this process (support/cli.py); the bad-input cases run as CI runs them, in a
subprocess, since their whole stderr must be one line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey

from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, follow_the_schema
from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process
from rag_eval_pipeline_tests.test_dagster.conftest import cli_instance

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

DEGRADED = "rag_eval_pipeline_tests.candidates:no_retrieval"
FAKE_MODEL = "fake-judge"
PRICES = "fake-judge=1:2"  # per 1,000 prompt and completion tokens


def _report_table(env: dict, commit: str) -> tuple[str, pd.DataFrame]:
    (path,) = Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit={commit}/run=*/regression_report.parquet")
    return path.parent.name.removeprefix("run="), pd.read_parquet(path)


def _metadata(env: dict, asset: str) -> dict[str, dict]:
    """Each run's latest materialization metadata of the asset, as plain values."""
    with cli_instance(env) as instance:
        records = instance.fetch_materializations(AssetKey(asset), limit=50).records
        return {
            record.run_id: {
                key: getattr(value, "value", value) for key, value in record.asset_materialization.metadata.items()
            }
            for record in records
        }


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def test_trends_tokens_and_the_history_of_real_gates(synthesized_cli_env, tmp_path):
    env = synthesized_cli_env
    base = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main")
    assert base.returncode == 0, base.stderr
    bad = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "bad", "--entry", DEGRADED)
    assert bad.returncode == 1, bad.stderr
    with FakeOpenAIServer(default=follow_the_schema) as server:
        llm_env = {
            **env,
            "RAG_EVAL_JUDGE": "llm",
            "RAG_EVAL_JUDGE_BASE_URL": server.base_url,
            "RAG_EVAL_JUDGE_MODEL": FAKE_MODEL,
            "RAG_EVAL_JUDGE_MAX_RETRIES": "0",
            "RAG_EVAL_PRICE_TABLE": PRICES,
        }
        llm = rag_eval(llm_env, "gate", "--tenant", "acme", "--candidate", "llm", "--metrics", "faithfulness,hit_rate")
    assert llm.returncode in (0, 1, 2) and "report: " in llm.stdout, llm.stdout + llm.stderr  # a verdict, stored

    # Trends: numbers on both assets, equal to what the report says.
    scores_metadata, report_metadata = _metadata(env, "metric_scores"), _metadata(env, "regression_report")
    for commit in ("base", "bad"):
        run_id, table = _report_table(env, commit)
        scored, reported = scores_metadata[run_id], report_metadata[run_id]
        for row in table.to_dict("records"):
            metric = row["metric"]
            assert scored.get(f"coverage/{metric}") == _number(row["coverage"]), (commit, metric)
            assert scored[f"measured/{metric}"] == row["n_measured"]
            assert reported.get(f"mean/{metric}") == _number(row["candidate_mean"])
            assert reported.get(f"delta/{metric}") == _number(row["delta"])
            assert reported.get(f"coverage/{metric}") == _number(row["coverage"])
            if commit == "base":  # no baseline: the report's mean is the scoring's own
                assert scored.get(f"mean/{metric}") == _number(row["candidate_mean"])
        assert reported["judge_tokens"] == 0 and reported["judge_calls"] == 0  # the offline judge
        assert (table["prompt_tokens"] == 0).all() and (table["run_prompt_tokens"] == 0).all()
    assert "delta/hit_rate" not in report_metadata[_report_table(env, "base")[0]]  # nothing to compare with

    # Tokens of the LLM judge, per metric and per run, and their cost.
    run_id, table = _report_table(env, "llm")
    assert "re-scored" in table["baseline_source"].iloc[0]  # the baseline was scored by the offline judge
    by_metric = table.set_index("metric")
    assert by_metric.loc["hit_rate", "prompt_tokens"] == 0  # no judge call serves hit rate
    assert by_metric.loc["faithfulness", "judge_calls"] > 0
    calls, prompt, completion = (int(table[f"run_{name}"].iloc[0]) for name in cost.METRIC_COLUMNS)
    assert (prompt, completion) == (10 * calls, 5 * calls)  # what the fake billed
    assert prompt >= int(table["prompt_tokens"].sum())  # the metrics' share, plus any re-scoring of the baseline
    assert report_metadata[run_id]["judge_tokens"] == prompt + completion
    assert report_metadata[run_id]["judge_cost"] == pytest.approx(prompt / 1000 + completion / 1000 * 2)
    markdown = next(
        Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit=llm/run={run_id}/regression_report.md")
    )
    assert "## Judge calls, tokens and cost" in markdown.read_text() and FAKE_MODEL in markdown.read_text()

    # The history of the three audits.
    out = tmp_path / "history.html"
    drawn = rag_eval({**env, "RAG_EVAL_PRICE_TABLE": PRICES}, "history", "--tenant", "acme", "--out", str(out))
    assert drawn.returncode == 0, drawn.stderr
    summary, path = drawn.stdout.strip().splitlines()
    assert summary.startswith("metric history of acme/v1: 3 audits, ") and Path(path) == out.resolve()
    html = out.read_text()
    assert re.findall(r'<circle class="audit (\w+)" [^>]*data-commit="bad"', html) == ["blocked"]
    assert html.count('class="metric-line"') == len(set(_report_table(env, "base")[1]["metric"]))
    assert "the offline judge makes no LLM call" not in html  # the latest audit's judge is the LLM
    assert f"{(prompt / 1000 + completion / 1000 * 2):.4f}" in html  # its cost, at the price table's prices


@pytest.mark.parametrize(
    "args, variables, message",
    [
        (("--limit", "0"), {}, "error: Invalid value for '--limit': 0 is not in the range x>=1."),
        ((), {"RAG_EVAL_PRICE_TABLE": "gpt=free"}, "error: RAG_EVAL_PRICE_TABLE must be model=prompt_per_1k"),
        (("--out", "history.txt"), {}, "error: --out history.txt must name an .html file"),
        (("--version", "v9"), {}, "error: acme/v9 has no stored report yet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(synthesized_cli_env, tmp_path, args, variables, message):
    out = [] if "--out" in args else ["--out", str(tmp_path / "h.html")]
    done = rag_eval_process({**synthesized_cli_env, **variables}, "history", "--tenant", "acme", *args, *out)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
