"""The spans of an evaluation, exported over OTLP to a real receiver on loopback (support/otlp_receiver.py):
their tree, their OpenInference attributes, the tenant's project, the ids the tables carry; and nothing at all
when tracing is off. Each case runs in a process of its own: a process sets its tracer provider up once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rag_eval_pipeline_tests.fake_openai_server import FakeOpenAIServer, follow_the_schema
from rag_eval_pipeline_tests.support.otlp_receiver import OtlpReceiver

REPO = Path(__file__).resolve().parents[2]
ITEMS = [{"qa_id": "q1", "question": "How long do refunds take?"}, {"qa_id": "q2", "question": "Who may read logs?"}]
CHUNKS = (["policy#0", "logs#0"], ["Refunds take 14 days from the return.", "Only the security team may read logs."])


@pytest.fixture(scope="module")
def receiver():
    with OtlpReceiver() as started:
        yield started


def _run(script: str, receiver: OtlpReceiver | None, tmp_path: Path, **env: str) -> dict:
    """The script in a fresh Python with tracing pointed at the receiver (off without one); its JSON output."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment.update(RAG_EVAL_WAREHOUSE=str(tmp_path / "warehouse"), PYTHONPATH=str(REPO), **env)
    if receiver is not None:
        environment.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_SERVICE_NAME="rag-eval-test")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


AUDIT = f"""
    import json, sys
    from rag_eval_pipeline.core import tracing
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.item import EvalItem
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.core.metrics.scoring import score_items
    from rag_eval_pipeline.core.retrieval import ReferenceCandidate
    from rag_eval_pipeline.evaluation.candidates import run_candidate

    embedder = Embedder()
    with tracing.tenant_scope("acme"), tracing.span("audit acme/v1"):
        outputs = run_candidate(ReferenceCandidate(*{CHUNKS!r}, embedder, top_k=1), {ITEMS!r})
        items = [EvalItem(o.qa_id, o.question, o.answer, o.contexts, o.answer) for o in outputs]
        _, judgements = score_items(items, OfflineJudge(embedder), embedder, ["faithfulness", "context_recall"])
    tracing.flush()
    print(json.dumps({{
        "outputs": [[o.trace_id, o.span_id] for o in outputs],
        "judged": [list(j.trace) for j in judgements],
        "sdk": "opentelemetry.sdk.trace" in sys.modules,
    }}))
"""


def test_with_tracing_off_nothing_is_exported_and_the_sdk_never_loads(tmp_path):
    result = _run(AUDIT, None, tmp_path)
    assert result["sdk"] is False
    assert result["outputs"] == [["", ""], ["", ""]] and result["judged"] == [["", ""], ["", ""]]


def test_an_audits_spans_form_one_tree_in_the_tenants_project(receiver, tmp_path):
    result = _run(AUDIT, receiver, tmp_path)
    trace_id = result["outputs"][0][0]
    spans = {span.span_id: span for span in receiver.of_trace(trace_id)}
    by_name = {span.name: span for span in spans.values()}
    (root,) = [span for span in spans.values() if span.name == "audit acme/v1"]
    assert {span.project for span in spans.values()} == {"rag-eval-acme"}  # one tenant, one project
    assert all(span.attributes.get("rag_eval.tenant") == "acme" for span in spans.values())

    for (item_trace, item_span), judged in zip(result["outputs"], result["judged"]):
        item = spans[item_span]  # the ids on the candidate's output are its item span's
        assert item_trace == trace_id and item.parent_id == root.span_id
        assert item.attributes["openinference.span.kind"] == "CHAIN" and item.attributes["input.value"]
        stages = sorted(s.name for s in spans.values() if s.parent_id == item.span_id)
        assert stages == ["answer", "embed query", "retrieve"]
        assert spans[judged[1]].name.startswith("judge ") and spans[judged[1]].parent_id == root.span_id
        assert spans[judged[1]].attributes["openinference.span.kind"] == "EVALUATOR"
    retrieval = by_name["retrieve"]
    assert retrieval.attributes["openinference.span.kind"] == "RETRIEVER"
    assert retrieval.attributes["retrieval.documents.0.document.id"] in CHUNKS[0]
    assert any(
        s.name == "embedding batch" and s.attributes["openinference.span.kind"] == "EMBEDDING" for s in spans.values()
    )


def test_a_candidates_own_spans_nest_under_its_item_in_its_process(receiver, tmp_path):
    script = f"""
        import json
        from rag_eval_pipeline.core import tracing
        from rag_eval_pipeline.evaluation.candidate_process import run_entry_point

        with tracing.tenant_scope("globex"), tracing.span("audit globex/v1"):
            outputs = run_entry_point("rag_eval_pipeline_tests.candidates:traces_itself", {ITEMS!r})
        tracing.flush()
        print(json.dumps([[o.trace_id, o.span_id, o.status] for o in outputs]))
    """
    outputs = _run(script, receiver, tmp_path)
    for trace_id, item_span, status in outputs:
        assert status == "ok"
        (own,) = [s for s in receiver.of_trace(trace_id) if s.name == "team retrieval" and s.parent_id == item_span]
        assert own.project == "rag-eval-globex" and own.attributes["team.question"]


def test_each_judge_call_is_a_span_with_its_tokens_and_the_openai_clients_llm_span_under_it(receiver, tmp_path):
    with FakeOpenAIServer(default=follow_the_schema) as server:
        script = f"""
            import json
            from rag_eval_pipeline.core import tracing
            from rag_eval_pipeline.core.embeddings import Embedder
            from rag_eval_pipeline.core.judging.item import EvalItem
            from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge
            from rag_eval_pipeline.core.llm.client import LLMSettings
            from rag_eval_pipeline.core.metrics.scoring import score_items

            judge = build_llm_judge(LLMSettings(base_url="{server.base_url}", model="fake", max_retries=0))
            item = EvalItem("q1", "How long?", "Refunds take 14 days.", [{{"id": "a", "text": "14 days."}}], "14 days.")
            with tracing.tenant_scope("acme"):
                _, [judgement] = score_items([item], judge, Embedder(), ["faithfulness"])
            tracing.flush()
            print(json.dumps(list(judgement.trace)))
        """
        trace_id, judged = _run(script, receiver, tmp_path)
    spans = receiver.of_trace(trace_id)
    (call,) = [s for s in spans if s.parent_id == judged and s.name == "answer_statements call"]
    assert call.attributes["llm.model_name"] == "fake" and "rag_eval.cache_hit" in call.attributes
    assert "CONTEXT" in call.attributes["input.value"] and call.attributes["output.value"]
    llm = [s for s in spans if s.parent_id == call.span_id and s.attributes.get("openinference.span.kind") == "LLM"]
    assert llm, "the openai client's own span is missing under the call"


def test_a_collector_that_does_not_answer_never_fails_an_evaluation(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once the socket is closed
    started = time.monotonic()
    result = _run(
        AUDIT,
        None,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    assert result["sdk"] is True and all(trace_id for trace_id, _ in result["outputs"])  # traced, then lost
    assert time.monotonic() - started < 240  # the flush gives up after the exporter's timeout, not never


def test_the_score_rows_of_an_item_the_candidate_failed_point_at_its_candidate_span():
    # Unjudged (no judge span), its rows still belong to the run's trace: the failure is on the candidate span.
    import pandas as pd

    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.evaluation.scoring import score_outputs

    outputs = pd.DataFrame(
        [
            {"qa_id": "q1", "question": "How long?", "answer": "", "contexts": [], "status": "failed"}
            | {"error": "timed out after 30 s", "commit": "c1", "trace_id": "a" * 32, "span_id": "b" * 16}
        ]
    )
    golden = pd.DataFrame([{"qa_id": "q1", "ground_truth": "14 days", "gold_chunk_ids": ["policy#0"]}])
    embedder = Embedder()
    rows, _ = score_outputs(outputs, golden, OfflineJudge(embedder), embedder, ["faithfulness", "hit_rate"], k=1)
    assert set(rows["status"]) == {"unmeasured"}
    assert set(zip(rows["trace_id"], rows["span_id"])) == {("a" * 32, "b" * 16)}
    untraced = outputs.assign(trace_id=float("nan"), span_id=float("nan"))  # older outputs joined with newer
    rows, _ = score_outputs(untraced, golden, OfflineJudge(embedder), embedder, ["hit_rate"], k=1)
    assert set(zip(rows["trace_id"], rows["span_id"])) == {("", "")}
