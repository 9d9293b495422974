"""Phoenix as the project runs it (scripts/phoenix_server.py): spans exported over OTLP/HTTP by the plain
OpenTelemetry SDK land in their tenant's project and no other, are found by trace id through Phoenix's REST
API with their parent/child shape and OpenInference attributes, and open from a trace link in the browser;
the server listens on loopback only, a Postgres database of its own works and the results database is
refused, and stop leaves no process.

The session's server (support/phoenix.py) serves most tests; the tests of start and stop start their own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag_eval_pipeline_tests.support.phoenix import load_trace, phoenix_script, start_phoenix, stop_phoenix

pytestmark = pytest.mark.phoenix

REPO = Path(__file__).resolve().parents[2]


def project(tenant: str) -> str:
    return f"rag-eval-{tenant}"


@contextmanager
def tracer_of(server, tenant: str | None, headers: dict[str, str] | None = None):
    """A tracer whose provider's resource names the tenant's project, exporting each span as it ends."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    resource = {"service.name": "rag-eval-tests"}
    if tenant is not None:
        resource["openinference.project.name"] = project(tenant)
    provider = TracerProvider(resource=Resource.create(resource))
    exporter = OTLPSpanExporter(endpoint=server.otlp_traces_endpoint, headers=headers, timeout=10)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider.get_tracer("rag_eval_pipeline_tests")
    finally:
        provider.shutdown()


def hex_ids(span) -> tuple[str, str]:
    context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def export_gate_trace(server, tenant: str, question: str = "What is the refund window?") -> dict[str, str]:
    """One gate's trace as the pipeline shapes it: gate > item > (retrieve, judge, score). Returns
    {"trace": trace id, span name: span id}."""
    with tracer_of(server, tenant) as tracer:
        with tracer.start_as_current_span("gate", attributes={"openinference.span.kind": "CHAIN"}) as gate:
            item_attributes = {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": "30 days"}
            with tracer.start_as_current_span("item", attributes=item_attributes) as item:
                retrieve_attributes = {
                    "openinference.span.kind": "RETRIEVER",
                    "retrieval.documents.0.document.id": "refunds.pdf#3",
                    "retrieval.documents.0.document.score": 0.82,
                }
                with tracer.start_as_current_span("retrieve", attributes=retrieve_attributes) as retrieve:
                    pass
                judge_attributes = {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "smollm2-135m-instruct",
                    "llm.token_count.prompt": 412,
                    "llm.token_count.completion": 37,
                    "llm.token_count.total": 449,
                }
                with tracer.start_as_current_span("judge", attributes=judge_attributes) as judge:
                    pass
                with tracer.start_as_current_span(
                    "score", attributes={"openinference.span.kind": "EVALUATOR"}
                ) as score:
                    pass
    ids = {name: hex_ids(span)[1] for name, span in (("gate", gate), ("item", item), ("retrieve", retrieve))}
    ids |= {"judge": hex_ids(judge)[1], "score": hex_ids(score)[1], "trace": hex_ids(gate)[0]}
    return ids


@pytest.fixture(scope="module")
def acme_and_globex(phoenix_server) -> dict[str, dict[str, str]]:
    """One gate trace for each of two tenants, arrived in Phoenix."""
    traces = {tenant: export_gate_trace(phoenix_server, tenant) for tenant in ("acme", "globex")}
    for tenant, ids in traces.items():
        spans = phoenix_server.wait_for_spans(project(tenant), ids["trace"], 5)
        assert len(spans) == 5, f"{tenant}'s trace: {len(spans)} of 5 spans arrived:\n{phoenix_server.log_tail()}"
    return traces


def test_spans_land_in_their_tenants_project_and_in_no_other(phoenix_server, acme_and_globex) -> None:
    assert {project("acme"), project("globex")} <= set(phoenix_server.projects())
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        trace_id = acme_and_globex[tenant]["trace"]
        assert len(phoenix_server.trace_spans(project(tenant), trace_id)) == 5
        assert phoenix_server.trace_spans(project(other), trace_id) == []
        assert phoenix_server.trace_spans("default", trace_id) == []


def test_a_trace_found_by_id_keeps_its_shape_and_openinference_attributes(phoenix_server, acme_and_globex) -> None:
    ids = acme_and_globex["acme"]
    spans = {span["name"]: span for span in phoenix_server.trace_spans(project("acme"), ids["trace"])}
    assert set(spans) == {"gate", "item", "retrieve", "judge", "score"}
    assert {span["context"]["trace_id"] for span in spans.values()} == {ids["trace"]}
    assert {name: span["context"]["span_id"] for name, span in spans.items()} == {name: ids[name] for name in spans}
    parents = {name: span["parent_id"] for name, span in spans.items()}
    assert parents == {
        "gate": None,
        "item": ids["gate"],
        "retrieve": ids["item"],
        "judge": ids["item"],
        "score": ids["item"],
    }
    # Phoenix reads openinference.span.kind into the span's kind.
    kinds = {name: span["span_kind"] for name, span in spans.items()}
    assert kinds == {"gate": "CHAIN", "item": "CHAIN", "retrieve": "RETRIEVER", "judge": "LLM", "score": "EVALUATOR"}
    judge = spans["judge"]["attributes"]
    assert judge["llm.token_count.prompt"] == 412
    assert judge["llm.token_count.completion"] == 37
    assert judge["llm.token_count.total"] == 449
    assert judge["llm.model_name"] == "smollm2-135m-instruct"
    assert spans["item"]["attributes"]["input.value"] == "What is the refund window?"
    assert spans["item"]["attributes"]["output.value"] == "30 days"
    assert spans["retrieve"]["attributes"]["retrieval.documents.0.document.id"] == "refunds.pdf#3"
    assert spans["judge"]["start_time"] <= spans["judge"]["end_time"]


def test_the_project_header_wins_over_the_resource(phoenix_server) -> None:
    """core/tracing.py exports every tenant's spans from one provider whose resource names no tenant, with
    the header x-project-name per tenant: Phoenix files them under the header's project."""
    tenant = f"header-{uuid.uuid4().hex[:6]}"
    with tracer_of(phoenix_server, None, headers={"x-project-name": project(tenant)}) as tracer:
        with tracer.start_as_current_span("gate", attributes={"openinference.span.kind": "CHAIN"}) as gate:
            pass
    trace_id = hex_ids(gate)[0]
    assert len(phoenix_server.wait_for_spans(project(tenant), trace_id, 1)) == 1
    assert phoenix_server.trace_spans("default", trace_id) == []


def test_a_span_tree_from_the_pipelines_tracing_helpers(phoenix_server) -> None:
    """rag_eval_pipeline.core.tracing, configured by the standard variables only, in a process of its own
    (it sets the process's tracer provider): a tenant's span tree lands in that tenant's project."""
    helpers = ("tenant_scope", "span", "ids", "flush", "LLM", "CHAIN")
    check = f"import rag_eval_pipeline.core.tracing as t; print(all(hasattr(t, n) for n in {helpers!r}))"
    probe = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=REPO)
    if probe.stdout.strip() != "True":
        pytest.skip(f"rag_eval_pipeline.core.tracing offers no {helpers} yet: {probe.stderr.strip()[-300:]}")
    tenant = f"helpers-{uuid.uuid4().hex[:6]}"
    code = f"""
import json
from rag_eval_pipeline.core import tracing
with tracing.tenant_scope({tenant!r}):
    with tracing.span("gate", tracing.CHAIN, {{"input.value": "v1"}}):
        gate = tracing.ids()
        with tracing.span("judge", tracing.LLM, {{"llm.token_count.prompt": 12, "llm.token_count.completion": 3}}):
            judge = tracing.ids()
tracing.flush()
print(json.dumps({{"gate": gate, "judge": judge}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix_server.url, "OTEL_SERVICE_NAME": "rag-eval-tests"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout.strip().splitlines()[-1])
    (trace_id, gate_id), (judge_trace_id, judge_id) = ids["gate"], ids["judge"]
    assert trace_id and judge_trace_id == trace_id
    spans = {span["name"]: span for span in phoenix_server.wait_for_spans(project(tenant), trace_id, 2)}
    assert set(spans) == {"gate", "judge"}
    assert spans["gate"]["parent_id"] is None and spans["gate"]["context"]["span_id"] == gate_id
    assert spans["judge"]["parent_id"] == gate_id and spans["judge"]["context"]["span_id"] == judge_id
    assert (spans["gate"]["span_kind"], spans["judge"]["span_kind"]) == ("CHAIN", "LLM")
    assert spans["judge"]["attributes"]["llm.token_count.prompt"] == 12
    assert phoenix_server.trace_spans("default", trace_id) == []


@pytest.mark.ui
def test_a_trace_link_opens_the_trace_in_the_ui(phoenix_server, acme_and_globex) -> None:
    """The link a report can hold, by trace id alone: Phoenix finds the tenant's project and draws the tree."""
    from rag_eval_pipeline_tests.dagster_ui import chromium, require_chromium

    require_chromium()
    ids = acme_and_globex["globex"]
    names = ["gate", "item", "retrieve", "judge", "score"]
    with chromium() as browser:
        load = load_trace(browser.driver, phoenix_server.trace_url(ids["trace"]), ids["trace"], names)
    depth = {node["name"]: node["level"] for node in load.shown["nodes"]}
    assert depth == {"gate": 0, "item": 1, "retrieve": 2, "judge": 2, "score": 2}
    assert "/projects/" in load.shown["url"]


def test_the_server_listens_on_loopback_only(phoenix_server) -> None:
    """The UI and OTLP/HTTP port and the OTLP/gRPC port (which Phoenix itself binds on every interface)."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads the kernel's socket tables in /proc (Linux)")
    listening = phoenix_script().listening_addresses(phoenix_server.pid)
    assert listening == {("127.0.0.1", phoenix_server.port), ("127.0.0.1", phoenix_server.grpc_port)}


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_stop_leaves_no_process_and_frees_the_ports(tmp_path) -> None:
    server = start_phoenix(tmp_path / "phoenix")
    script = phoenix_script()
    pid = server.pid
    assert pid is not None and server.healthy()
    assert script.group_members(pid) == [pid]  # phoenix serve is one process
    record = json.loads(server.pid_path.read_text())
    assert record["pid"] == pid and record["database"] == "sqlite"
    assert (tmp_path / "phoenix" / "phoenix.db").is_file()
    stop_phoenix(server)
    assert script.group_members(pid) == []
    assert _refused(server.port) and _refused(server.grpc_port)
    assert not server.pid_path.exists() and not server.running


def test_in_the_foreground_it_supervises_phoenix_and_a_sigterm_stops_both(tmp_path) -> None:
    """As a container or a service manager runs it: the script stays, Phoenix's ports are checked, and
    the SIGTERM a service manager sends the script ends Phoenix too."""
    script = phoenix_script()
    ports = [str(script.free_port()), str(script.free_port())]
    command = [sys.executable, str(REPO / "scripts" / "phoenix_server.py"), "start", "--foreground"]
    command += ["--port", ports[0], "--grpc-port", ports[1], "--working-dir", str(tmp_path / "phoenix")]
    supervisor = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not any("running (pid" in line for line in lines):  # printed once it answers on loopback only
            line = supervisor.stdout.readline()
            assert line, f"the script ended (exit {supervisor.wait()}) before Phoenix ran:\n{''.join(lines)}"
            lines.append(line)
        record = json.loads((tmp_path / "phoenix" / "phoenix.pid").read_text())
        assert record["pid"] != supervisor.pid and script.group_members(record["pid"])
        supervisor.terminate()
        assert supervisor.wait(timeout=60) == 0
        assert script.group_members(record["pid"]) == []
        assert _refused(int(ports[0])) and _refused(int(ports[1]))
        assert not (tmp_path / "phoenix" / "phoenix.pid").exists()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            script.PhoenixServer(working_dir=tmp_path / "phoenix").stop()


@pytest.mark.postgres
def test_phoenix_on_a_postgres_database_of_its_own(tmp_path) -> None:
    from sqlalchemy import create_engine, pool, text

    from rag_eval_pipeline_tests.support.postgres import database_url, scratch_database

    with scratch_database("phoenix_test") as name:
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
        server = start_phoenix(tmp_path / "phoenix", database_url=url)
        try:
            ids = export_gate_trace(server, "initech")
            assert len(server.wait_for_spans(project("initech"), ids["trace"], 5)) == 5
        finally:
            stop_phoenix(server)
        engine = create_engine(database_url(name), poolclass=pool.NullPool)
        try:
            with engine.connect() as connection:
                projects = set(connection.execute(text("SELECT name FROM projects")).scalars())
        finally:
            engine.dispose()
        assert project("initech") in projects
        assert not (tmp_path / "phoenix" / "phoenix.db").exists()  # nothing went to SQLite


def test_the_results_database_is_refused_as_phoenixs() -> None:
    script = phoenix_script()
    results = {"RAG_EVAL_DATABASE_URL": "postgresql://rag_eval_worker:pw@localhost/rag_eval"}
    for url in ("postgresql://postgres@127.0.0.1:5432/rag_eval", "postgresql+asyncpg://phoenix@localhost/rag_eval"):
        with pytest.raises(script.PhoenixError, match="results database"):
            script.check_database_url(url, results)
    admin = {"RAG_EVAL_DATABASE_ADMIN_URL": "postgresql://postgres@db.internal:6543/results"}
    with pytest.raises(script.PhoenixError, match="RAG_EVAL_DATABASE_ADMIN_URL"):
        script.check_database_url("postgresql://phoenix:secret@db.internal:6543/results", admin)
    assert script.check_database_url("postgresql://phoenix@127.0.0.1/phoenix", results) == (
        "postgresql://phoenix@127.0.0.1/phoenix"
    )
    assert script.check_database_url("postgresql://phoenix@db.internal/rag_eval", results)  # another server
    # The same database spelled another way is still the results database (a reported defect).
    for alias in (
        "postgresql://phoenix@localhost./rag_eval",
        "postgresql://phoenix@[::ffff:127.0.0.1]/rag_eval",
        "postgresql://phoenix@0.0.0.0:5432/rag_eval",
        "postgresql://phoenix@127.0.0.1/%72ag_eval",
        "postgresql:///rag_eval?host=/var/run/postgresql",
    ):
        with pytest.raises(script.PhoenixError, match="results database"):
            script.check_database_url(alias, results)
    assert script.check_database_url("postgresql://phoenix@127.0.0.1:5433/rag_eval", results)  # another port
    for bad in ("sqlite:///tmp/phoenix.db", "postgresql://phoenix@127.0.0.1/"):
        with pytest.raises(script.PhoenixError):
            script.check_database_url(bad, {})
    env = script.PhoenixServer(database_url="postgresql://postgres@127.0.0.1/rag_eval").environment
    with pytest.raises(script.PhoenixError):
        env(results)


def test_the_servers_environment_is_loopback_quiet_and_untraced() -> None:
    script = phoenix_script()
    server = script.PhoenixServer(working_dir=Path("/srv/phoenix"), port=7006, grpc_port=7317)
    inherited = {
        "PATH": "/usr/bin",
        "PHOENIX_HOST": "0.0.0.0",
        "PHOENIX_SQL_DATABASE_URL": "postgresql://x@h/y",
        "PHOENIX_ENABLE_AUTH": "true",
        "PHOENIX_TELEMETRY_ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:7006",
        "PYTHONPATH": "/work/main",
    }
    env = server.environment(inherited)
    assert env["PHOENIX_HOST"] == "127.0.0.1"
    assert (env["PHOENIX_PORT"], env["PHOENIX_GRPC_PORT"], env["PHOENIX_WORKING_DIR"]) == (
        "7006",
        "7317",
        "/srv/phoenix",
    )
    assert "PHOENIX_SQL_DATABASE_URL" not in env  # none given: SQLite in the working folder
    assert env["PHOENIX_ENABLE_AUTH"] == "true" and env["PHOENIX_TELEMETRY_ENABLED"] == "true"  # the operator's
    assert env["PHOENIX_ALLOW_EXTERNAL_RESOURCES"] == "false"
    assert not any(k.startswith("OTEL_") for k in env) and "PYTHONPATH" not in env
    assert server.trace_url("ab" * 16) == f"http://127.0.0.1:7006/redirects/traces/{'ab' * 16}"
    # Phoenix's Prometheus endpoint listens on every interface: refused before anything starts.
    with pytest.raises(script.PhoenixError, match="PHOENIX_ENABLE_PROMETHEUS"):
        server.environment({**inherited, "PHOENIX_ENABLE_PROMETHEUS": "True"})
    off = server.environment({**inherited, "PHOENIX_ENABLE_PROMETHEUS": "false"})
    assert off["PHOENIX_ENABLE_PROMETHEUS"] == "false"
    assert script.redact("postgresql://phoenix:s3cret@db/phoenix") == "postgresql://phoenix:***@db/phoenix"
