"""A traced gate: the run's span, each step's, each item's, with the trace and span ids on the rows of
candidate_outputs and metric_scores, all in the tenant's project (a real OTLP receiver on loopback)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval_process
from rag_eval_pipeline_tests.support.otlp_receiver import OtlpReceiver

pytestmark = [pytest.mark.dagster, pytest.mark.cli]


def _audit_table(env, commit: str, name: str) -> pd.DataFrame:
    (path,) = Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit={commit}/run=*/{name}.parquet")
    return pd.read_parquet(path)


def test_a_gates_rows_name_the_spans_of_their_items(synthesized_cli_env):
    with OtlpReceiver() as receiver:
        env = {**synthesized_cli_env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        # A process: the tracer provider is set once per process, as in CI.
        done = rag_eval_process(env, "gate", "--tenant", "acme", "--candidate", "traced", "--branch", "main")
        assert done.returncode == 0, done.stderr
        outputs = _audit_table(env, "traced", "candidate_outputs")
        scores = _audit_table(env, "traced", "metric_scores")
        (trace_id,) = set(outputs["trace_id"]) | set(scores["trace_id"])  # one run, one trace
        spans = {span.span_id: span for span in receiver.of_trace(trace_id)}

    (run,) = [s for s in spans.values() if s.name == "audit acme/v1"]
    steps = {s.name: s for s in spans.values() if s.parent_id == run.span_id}
    assert set(steps) == {"candidate_outputs", "metric_scores", "regression_report"}  # every step of the run
    for row in outputs.itertuples():
        assert spans[row.span_id].name == f"candidate {row.qa_id}"
        assert spans[row.span_id].parent_id == steps["candidate_outputs"].span_id
    answered = set(outputs.loc[outputs["status"] == "ok", "qa_id"])
    for row in scores.drop_duplicates("qa_id").itertuples():
        if row.qa_id in answered:
            assert spans[row.span_id].name == f"judge {row.qa_id}"
            assert spans[row.span_id].parent_id == steps["metric_scores"].span_id
        else:  # on a loaded machine an item can time out: its rows point at the span that says so
            assert spans[row.span_id].name == f"candidate {row.qa_id}"
    assert {s.project for s in spans.values()} == {"rag-eval-acme"}
    assert run.attributes["rag_eval.commit"] == "traced"
