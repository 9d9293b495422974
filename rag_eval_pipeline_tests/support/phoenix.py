"""Phoenix (the trace viewer) for the tests: one server per test session, from .phoenix-venv.

`phoenix_server` starts `phoenix serve` (scripts/phoenix_server.py, loaded by its path: it is no module of
the package) on free ports of 127.0.0.1, SQLite in a temporary folder, and stops its process group at the
end, failing if anything of it is left. The suite runs modules whole on one worker (`--dist loadfile`) and
only test_tracing/test_phoenix.py asks for it, so one session starts it once. `make test` installs the venv;
a run without it installs it here (a few minutes, once), and the tests skip, saying why, only when that
fails. Registered for the whole suite in the root conftest.py.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "phoenix_server.py"


def phoenix_script() -> ModuleType:
    """scripts/phoenix_server.py as a module (once per process)."""
    name = "rag_eval_phoenix_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def ensure_installed() -> ModuleType:
    """The script, with Phoenix's venv installed; skips the test when the venv cannot be made."""
    script = phoenix_script()
    try:
        script.install()
    except (script.PhoenixError, OSError) as error:
        pytest.skip(f"Phoenix's venv ({script.VENV}) could not be created (`make test` makes it): {error}")
    return script


def start_phoenix(folder: Path, **options):
    """A started server on free ports with its data in folder; the caller stops it."""
    script = ensure_installed()
    server = script.PhoenixServer(working_dir=folder, port=script.free_port(), grpc_port=script.free_port(), **options)
    return server.start()


def stop_phoenix(server) -> None:
    """Stop it; fail if a process of its group is still there."""
    pgid = server.pid
    server.stop()
    if pgid is not None:
        left = phoenix_script().group_members(pgid)
        assert not left, f"Phoenix processes still running after stop: {left}"


@pytest.fixture(scope="session")
def phoenix_server(tmp_path_factory):
    server = start_phoenix(tmp_path_factory.mktemp("phoenix"))
    try:
        yield server
    finally:
        stop_phoenix(server)


# --- Phoenix's UI in headless Chromium (the browser comes from rag_eval_pipeline_tests/dagster_ui.py) ---------

# The trace's span tree: each node's name and depth, once the names are filled in (while the page loads, the
# tree is drawn as nameless placeholders); and when the page's scripts had loaded (DOMContentLoaded, on the
# browser's clock: the link's redirect to the project's trace page happens in the page, after it).
_TRACE_TREE_PROBE = """
const nodes = [...document.querySelectorAll('.span-node-wrap')].map(node => ({
  name: (node.querySelector('.span-node__heading') || node).innerText.trim(),
  level: Number(node.style.getPropertyValue('--trace-tree-nesting-level'))}));
const navigation = performance.getEntriesByType('navigation')[0];
return {nodes: nodes, url: location.href, at: performance.now(),
        scripts_loaded_ms: navigation ? navigation.domContentLoadedEventEnd : null};
"""


def load_trace(driver, link: str, trace_id: str, span_names: list[str], timeout: float = 60.0):
    """Open a trace link (`/redirects/traces/<id>`: Phoenix finds the project and redirects) and wait until
    the trace's span tree shows every name in span_names; a Load (wall and browser seconds, what showed)."""
    from rag_eval_pipeline_tests.dagster_ui import Load, _wait_for

    started = time.perf_counter()
    driver.get(link)
    shown = _wait_for(
        driver,
        lambda d: d.execute_script(_TRACE_TREE_PROBE),
        lambda s: f"/traces/{trace_id}" in s["url"] and set(span_names) <= {node["name"] for node in s["nodes"]},
        timeout,
        f"trace {trace_id}'s spans {span_names}",
    )
    return Load(time.perf_counter() - started, shown.pop("at") / 1000, shown)


def load_health(driver, server_url: str, timeout: float = 30.0):
    """Phoenix's /healthz (a few bytes of text) in the same browser: the floor of any page load from it."""
    from rag_eval_pipeline_tests.dagster_ui import Load, _wait_for

    started = time.perf_counter()
    driver.get(f"{server_url}/healthz")
    shown = _wait_for(
        driver,
        lambda d: d.execute_script(
            "return {text: document.body ? document.body.innerText : '', at: performance.now()}"
        ),
        lambda s: bool(s["text"].strip()),
        timeout,
        "/healthz",
    )
    return Load(time.perf_counter() - started, shown.pop("at") / 1000, shown)
