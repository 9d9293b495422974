"""Trace lookup in Phoenix against the design's target (under 2 s): from a report's trace link to the
rendered trace in headless Chromium, and Phoenix's REST lookup of a trace by its id; cold and warm.

    .venv/bin/python benchmarks/trace_lookup.py [--traces 500] [--runs 5]

Setup (not timed): Phoenix from .phoenix-venv (scripts/phoenix_server.py; `make traces` or `make test`
installs it) on free ports of 127.0.0.1, SQLite in a temporary folder; N gate traces (gate > item >
retrieve, judge, score: 5 spans with OpenInference attributes) for tenant `bench` (project rag-eval-bench)
and N for tenant `other`, exported over OTLP/HTTP by the OpenTelemetry SDK, and waited for. Then, each
lookup of a trace not looked up before:

- `ui_trace`: `driver.get` of the link a report holds, `/redirects/traces/<trace id>` (Phoenix finds the
  project, redirects to the project's trace page), until the trace's span tree shows all 5 span names.
- `rest_trace`: GET `/v1/projects/rag-eval-bench/spans?trace_id=<id>` until its 5 spans are parsed.

Cold: a fresh Chromium (empty profile and cache) per load; a new HTTP connection per request. Warm: one
Chromium that opened a trace link once before (untimed); one kept-alive connection that made a request
before. Peer, in the same run and the same kind of browser or connection: Phoenix's `/healthz` (a few
bytes), the floor of any page load or request from this server. Every process is stopped by its PID.
Writes benchmarks/results/trace_lookup.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_eval_pipeline_tests.dagster_ui import chromium, require_chromium  # noqa: E402
from rag_eval_pipeline_tests.support.phoenix import (  # noqa: E402
    load_health,
    load_trace,
    phoenix_script,
    start_phoenix,
    stop_phoenix,
)

RESULTS = ROOT / "benchmarks" / "results"
SLA_S = 2.0
SPAN_NAMES = ["gate", "item", "retrieve", "judge", "score"]
TENANT, OTHER = "bench", "other"


def project(tenant: str) -> str:
    return f"rag-eval-{tenant}"


def export_traces(server, tenant: str, count: int) -> list[str]:
    """count gate traces of 5 spans each for the tenant's project, batched; their trace ids."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "rag-eval", "openinference.project.name": project(tenant)})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=server.otlp_traces_endpoint)))
    tracer = provider.get_tracer("trace_lookup")
    trace_ids = []
    for n in range(count):
        with tracer.start_as_current_span("gate", attributes={"openinference.span.kind": "CHAIN"}) as gate:
            item = {"openinference.span.kind": "CHAIN", "input.value": f"question {n}", "output.value": f"answer {n}"}
            with tracer.start_as_current_span("item", attributes=item):
                retrieve = {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": f"doc{n}#0"}
                with tracer.start_as_current_span("retrieve", attributes=retrieve):
                    pass
                judge = {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "smollm2-135m-instruct",
                    "llm.token_count.prompt": 400 + n % 50,
                    "llm.token_count.completion": 30,
                }
                with tracer.start_as_current_span("judge", attributes=judge):
                    pass
                with tracer.start_as_current_span("score", attributes={"openinference.span.kind": "EVALUATOR"}):
                    pass
        trace_ids.append(format(gate.get_span_context().trace_id, "032x"))
    provider.shutdown()  # sends what is batched
    return trace_ids


def wait_arrived(server, tenant: str, trace_ids: list[str], timeout_s: float = 120.0) -> None:
    """Every trace's 5 spans are in Phoenix (it inserts what it receives in batches)."""
    deadline = time.monotonic() + timeout_s
    for trace_id in trace_ids:
        spans = server.wait_for_spans(project(tenant), trace_id, 5, timeout_s=max(1.0, deadline - time.monotonic()))
        if len(spans) != 5:
            raise SystemExit(f"trace {trace_id} of {tenant}: {len(spans)} of 5 spans arrived:\n{server.log_tail()}")


def rest_get(connection: http.client.HTTPConnection, path: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise SystemExit(f"GET {path}: {response.status} {body[:200]!r}")
    return time.perf_counter() - started, body


def rest_trace(connection, trace_id: str) -> float:
    path = f"/v1/projects/{project(TENANT)}/spans?trace_id={trace_id}&limit=1000"
    started = time.perf_counter()
    _, body = rest_get(connection, path)
    spans = json.loads(body)["data"]
    elapsed = time.perf_counter() - started
    if sorted(span["name"] for span in spans) != sorted(SPAN_NAMES):
        raise SystemExit(f"trace {trace_id}: {[span['name'] for span in spans]}")
    return elapsed


def rest_loads(server, targets: list[str]) -> dict[str, dict[str, list[float]]]:
    """Cold: a new connection per request, each a trace not asked before. Warm: one open connection."""
    cold: dict[str, list[float]] = {"rest_trace": [], "rest_peer": []}
    warm: dict[str, list[float]] = {"rest_trace": [], "rest_peer": []}
    for trace_id in targets:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
        cold["rest_trace"].append(rest_trace(connection, trace_id))
        connection.close()
        connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
        cold["rest_peer"].append(rest_get(connection, "/healthz")[0])
        connection.close()
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    rest_trace(connection, targets[0])
    rest_get(connection, "/healthz")
    for trace_id in targets:
        warm["rest_trace"].append(rest_trace(connection, trace_id))
        warm["rest_peer"].append(rest_get(connection, "/healthz")[0])
    connection.close()
    return {"cold": cold, "warm": warm}


# What a cold trace page fetched: its JavaScript (as sent, and unpacked) and its GraphQL requests.
_PAGE_WEIGHT = """
const resources = performance.getEntriesByType('resource');
const scripts = resources.filter(r => r.name.endsWith('.js'));
return {javascript_sent_mb: scripts.reduce((n, r) => n + r.transferSize, 0) / 1e6,
        javascript_mb: scripts.reduce((n, r) => n + r.decodedBodySize, 0) / 1e6,
        graphql_requests: resources.filter(r => r.name.endsWith('/graphql')).length};
"""


def browser_loads(server, cold_targets: list[str], warm_targets: list[str]) -> tuple[dict, str]:
    """Cold: a Chromium of its own per load. Warm: one Chromium that has opened a trace link once."""
    cold: dict[str, list] = {"ui_trace": [], "ui_peer": []}
    warm: dict[str, list] = {"ui_trace": [], "ui_peer": []}
    page: dict[str, float] = {}
    for trace_id in cold_targets:
        with chromium() as browser:
            cold["ui_trace"].append(load_trace(browser.driver, server.trace_url(trace_id), trace_id, SPAN_NAMES))
            page = page or browser.driver.execute_script(_PAGE_WEIGHT)
        with chromium() as browser:
            cold["ui_peer"].append(load_health(browser.driver, server.url))
    with chromium() as browser:
        first, *others = warm_targets
        load_trace(browser.driver, server.trace_url(first), first, SPAN_NAMES)
        load_health(browser.driver, server.url)
        for trace_id in others:
            warm["ui_trace"].append(load_trace(browser.driver, server.trace_url(trace_id), trace_id, SPAN_NAMES))
            warm["ui_peer"].append(load_health(browser.driver, server.url))
        version = browser.version
    return {"cold": cold, "warm": warm, "page": page}, version


def summary(values: list) -> dict:
    walls = [round(v if isinstance(v, float) else v.wall_s, 3) for v in values]
    figures = {"median_s": round(statistics.median(walls), 3), "max_s": max(walls), "runs_s": walls}
    if values and not isinstance(values[0], float):
        browser = [round(v.browser_s, 3) for v in values]
        figures |= {"browser_clock_median_s": round(statistics.median(browser), 3), "browser_clock_runs_s": browser}
        scripts = [v.shown.get("scripts_loaded_ms") for v in values]
        if all(isinstance(ms, (int, float)) for ms in scripts):  # the trace page: when its scripts had loaded
            figures["scripts_loaded_median_s"] = round(statistics.median(scripts) / 1000, 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=500, help="gate traces per tenant (default 500)")
    parser.add_argument("--runs", type=int, default=5, help="timed lookups per kind and mode (default 5)")
    args = parser.parse_args()
    require_chromium()
    script = phoenix_script()
    with tempfile.TemporaryDirectory(prefix="trace-lookup-") as scratch:
        print("starting Phoenix ...", flush=True)
        server = start_phoenix(Path(scratch) / "phoenix")
        try:
            print(
                f"Phoenix ready in {server.startup_s:.1f} s; exporting {args.traces} traces per tenant ...", flush=True
            )
            began = time.monotonic()
            trace_ids = export_traces(server, TENANT, args.traces)
            other_ids = export_traces(server, OTHER, args.traces)
            exported_s = time.monotonic() - began
            # Distinct traces from the middle of the set: none looked up before it is timed.
            middle = len(trace_ids) // 2
            targets = trace_ids[middle : middle + 3 * args.runs + 1]
            rest_targets, cold_targets, warm_targets = (
                targets[: args.runs],
                targets[args.runs : 2 * args.runs],
                targets[2 * args.runs :],
            )
            wait_arrived(server, TENANT, [trace_ids[-1]])
            wait_arrived(server, OTHER, [other_ids[-1]])
            arrived_s = time.monotonic() - began
            print(f"exported in {exported_s:.1f} s, all in Phoenix after {arrived_s:.1f} s; timing ...", flush=True)
            load_before = os.getloadavg()
            rest = rest_loads(server, rest_targets)
            browser, chromium_version = browser_loads(server, cold_targets, warm_targets)
            load_after = os.getloadavg()
        finally:
            stop_phoenix(server)
    modes = {
        mode: {kind: summary(values) for kind, values in {**rest[mode], **browser[mode]}.items()}
        for mode in ("cold", "warm")
    }
    verdicts = {
        f"{kind}_{mode}": "pass" if modes[mode][kind]["median_s"] < SLA_S else "fail"
        for mode in modes
        for kind in ("ui_trace", "rest_trace")
    }
    figures = {
        "command": f".venv/bin/python benchmarks/trace_lookup.py --traces {args.traces} --runs {args.runs}",
        "sla_s": SLA_S,
        "sla": {**verdicts, "all": "pass" if set(verdicts.values()) == {"pass"} else "fail"},
        "runs": args.runs,
        "traces_per_tenant": args.traces,
        "spans": 2 * 5 * args.traces,
        "phoenix": script.PHOENIX_VERSION,
        "phoenix_startup_s": round(server.startup_s or 0.0, 1),
        "export_s": round(exported_s, 1),
        "arrived_s": round(arrived_s, 1),
        "chromium": chromium_version,
        "trace_page": {k: round(v, 1) if isinstance(v, float) else v for k, v in browser["page"].items()},
        "trace_link": "/redirects/traces/<trace id>",
        "rest_lookup": f"GET /v1/projects/{project(TENANT)}/spans?trace_id=<trace id>",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_1m": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        },
        "ratio_to_peer": {
            mode: {
                kind: round(modes[mode][kind]["median_s"] / modes[mode][peer]["median_s"], 1)
                for kind, peer in (("ui_trace", "ui_peer"), ("rest_trace", "rest_peer"))
            }
            for mode in modes
        },
        **modes,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "trace_lookup.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
