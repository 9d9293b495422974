"""The Dagster UI in headless Chromium: a demo instance, `dagster dev` on loopback, and timed page loads.

Shared by the UI test (rag_eval_pipeline_tests/test_ui) and the load-time benchmark
(benchmarks/ui_load.py). Every process started here is stopped by its PID, and checked to be gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HOST = "127.0.0.1"

# The lineage as the README draws it: every table is an asset, and the asset graph must show them all.
LINEAGE = [
    "raw_documents",
    "rejected_documents",
    "document_chunks",
    "chunk_clusters",
    "synthetic_qa",
    "generation_failures",
    "generation_plan",
    "golden_set",
    "rejected_qa",
    "synthesis_plan",
    "candidate_outputs",
    "metric_scores",
    "regression_report",
]
REPORT_ASSET = "regression_report"
DEMO_TENANT, DEMO_VERSION = "demo", "v1"

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # we run as root in a container
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # No call home on a closed network: updates, sync, field trials.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # a container's /dev/shm is small
    "--window-size=1600,1000",  # the whole lineage fits on screen
]
POLL_S = 0.05  # WebDriverWait's default (0.5 s) would blur the timings


def declared_lineage() -> tuple[set[str], int]:
    """The assets and the number of dependencies between them that the code location declares."""
    from rag_eval_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    return {key.to_user_string() for key in keys}, sum(len(graph.get(key).parent_keys) for key in keys)


def require_chromium() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: `make test` installs Debian's chromium and chromium-driver")


# --- processes, by PID ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    """A PID with its start time, so a PID the kernel has handed to someone else is never signalled."""

    pid: int
    started: int


def _stat(pid: int) -> tuple[int, int, str, int] | None:
    """(parent PID, session id, state, start time) from /proc, or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[3]), fields[0], int(fields[19])


def proc_of(pid: int) -> Proc:
    stat = _stat(pid)
    assert stat is not None, f"process {pid} is gone"
    return Proc(pid, stat[3])


def process_tree(root: Proc) -> set[Proc]:
    """root and its descendants, plus every process of the session root leads (orphans included:
    the kernel does not hand out a PID again while it names a session)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            table[int(entry)] = stat
    members = {root.pid} if root.pid in table and table[root.pid][3] == root.started else set()
    members |= {pid for pid, (_, session, _, _) in table.items() if session == root.pid}
    grown = True
    while grown:
        children = {pid for pid, (parent, _, _, _) in table.items() if parent in members} - members
        members |= children
        grown = bool(children)
    return {Proc(pid, table[pid][3]) for pid in members}


def alive(procs: set[Proc]) -> set[Proc]:
    """The ones still running (a zombie has exited, it only waits to be reaped)."""
    living = set()
    for proc in procs:
        stat = _stat(proc.pid)
        if stat is not None and stat[3] == proc.started and stat[2] != "Z":
            living.add(proc)
    return living


def _signal(procs: set[Proc], signum: int) -> None:
    for proc in alive(procs):
        try:
            os.kill(proc.pid, signum)
        except ProcessLookupError:
            pass


def _wait_gone(procs: set[Proc], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)


def stop_processes(root: Proc, known: set[Proc], grace_s: float = 20.0) -> set[Proc]:
    """SIGTERM every process of root's tree, SIGKILL what is left after grace_s; returns survivors (none)."""
    procs = known | process_tree(root)
    _signal(procs, signal.SIGTERM)
    _wait_gone(procs, grace_s)
    procs |= process_tree(root)  # anything spawned while shutting down
    _signal(procs, signal.SIGKILL)
    _wait_gone(procs, 5.0)
    return alive(procs | process_tree(root))


# --- the instance and dagster dev ---------------------------------------------------------------------


def _log_tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def prepare_instance(root: Path) -> dict[str, str]:
    """A fresh instance and warehouse under root with the demo lineage materialized; returns their env."""
    home = root / "home"
    home.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "RAG_EVAL_WAREHOUSE": str(root / "warehouse")}
    log = root / "demo.log"
    with log.open("w") as out:
        status = subprocess.run(
            [str(VENV_BIN / "rag-eval"), "demo"], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    if status != 0:
        raise RuntimeError(f"`rag-eval demo` exited with {status}:\n{_log_tail(log)}")
    return env


def report_title(env: dict[str, str]) -> str:
    """The first heading of the report the latest materialization wrote: what its page must show."""
    audits = Path(env["RAG_EVAL_WAREHOUSE"]) / DEMO_TENANT / DEMO_VERSION / "audits"
    (report,) = audits.glob("commit=*/run=*/regression_report.md")  # the one demo run's audit
    return report.read_text().splitlines()[0].removeprefix("# ").strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


# pytest may leave SIGINT ignored for its children, and an ignored signal survives exec: dagster dev
# would then never shut down its webserver, daemon and code servers. Reset both before exec.
_EXEC_WITH_DEFAULT_SIGNALS = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGTERM, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@dataclass
class DagsterDev:
    """A running `dagster dev`: its URL, its log, and every process it started."""

    url: str
    process: subprocess.Popen
    log: Path
    procs: set[Proc] = field(default_factory=set)

    def graphql(self, query: str) -> dict:
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["data"]

    def lineage_edges(self) -> int:
        """How many dependencies between assets the code location declares: the edges the graph draws."""
        nodes = self.graphql("{ assetNodes { dependencyKeys { path } } }")["assetNodes"]
        return sum(len(node["dependencyKeys"]) for node in nodes)


def _location_errors(server: DagsterDev) -> list[str] | None:
    """None while the code location is loading; then the load errors (empty once it is loaded)."""
    data = server.graphql("""{ workspaceOrError { ... on Workspace { locationEntries {
        loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }""")
    entries = data["workspaceOrError"]["locationEntries"]
    if not entries or any(entry["loadStatus"] != "LOADED" for entry in entries):
        return None
    return [
        entry["locationOrLoadError"]["message"]
        for entry in entries
        if entry["locationOrLoadError"]["__typename"] == "PythonError"
    ]


def _wait_ready(server: DagsterDev, timeout: float) -> None:
    """Up once /server_info answers and the code location has loaded (or failed to)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {server.process.returncode}:\n{_log_tail(server.log)}")
        try:
            urllib.request.urlopen(f"{server.url}/server_info", timeout=2).close()
            errors = _location_errors(server)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            errors = None
        if errors:
            raise RuntimeError(f"the code location failed to load: {errors}\n{_log_tail(server.log)}")
        if errors == []:
            return
        time.sleep(0.5)
    raise RuntimeError(f"dagster dev not ready at {server.url} within {timeout:.0f} s:\n{_log_tail(server.log)}")


@contextmanager
def dagster_dev(env: dict[str, str], log: Path, ready_timeout: float = 120.0) -> Iterator[DagsterDev]:
    """`dagster dev` on loopback in its own session; on exit every process of it is stopped by PID."""
    port = free_port()
    command = [str(VENV_BIN / "dagster"), "dev", "-h", HOST, "-p", str(port), "-w", "workspace.yaml"]
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGNALS, *command],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = DagsterDev(f"http://{HOST}:{port}", process, log)
    root = proc_of(process.pid)
    try:
        _wait_ready(server, ready_timeout)
        server.procs = process_tree(root)
        # The first-visit "Join the Dagster community" dialog would cover the page; mark it seen, as a
        # returning user has.
        server.graphql("mutation { setNuxSeen }")
        yield server
    finally:
        server.procs |= process_tree(root)
        survivors = stop_processes(root, server.procs)
        process.wait(timeout=10)
        if survivors:
            raise RuntimeError(f"dagster dev processes still running after SIGKILL: {sorted(p.pid for p in survivors)}")


# --- Chromium -----------------------------------------------------------------------------------------


@dataclass
class Browser:
    driver: object  # selenium.webdriver.Chrome
    procs: set[Proc] = field(default_factory=set)

    @property
    def version(self) -> str:
        return self.driver.capabilities["browserVersion"]


@contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium with an empty profile, driven by Debian's chromedriver; stopped by PID on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        # Both paths given: Selenium Manager is never asked to find (or download) a driver or browser.
        # Its own session lets us find every Chromium process, even one orphaned by chromedriver.
        service = Service(executable_path=str(CHROMEDRIVER), popen_kw={"start_new_session": True})
        driver = webdriver.Chrome(service=service, options=options)
        browser = Browser(driver)
        root = proc_of(service.process.pid)
        try:
            browser.procs = process_tree(root)
            yield browser
        finally:
            browser.procs |= process_tree(root)
            try:
                driver.quit()  # chromedriver closes Chromium, then Selenium stops chromedriver
            finally:
                survivors = stop_processes(root, browser.procs, grace_s=5.0)
            if survivors:
                raise RuntimeError(
                    f"Chromium processes still running after SIGKILL: {sorted(p.pid for p in survivors)}"
                )


# --- timed page loads ---------------------------------------------------------------------------------


@dataclass
class Load:
    """One page load: wall time from driver.get until the page showed what we waited for, and the same
    interval on the browser's clock (performance.now() counts from the navigation's start)."""

    wall_s: float
    browser_s: float
    shown: dict


def _wait_for(driver, probe: Callable, satisfied: Callable[[dict], bool], timeout: float, what: str) -> dict:
    """Poll probe(driver) until satisfied; on timeout, say what the page showed instead."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    last: dict = {}

    def check(d):
        nonlocal last
        last = probe(d)
        return last if satisfied(last) else False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=POLL_S).until(check)
    except TimeoutException:
        raise AssertionError(f"{what} not shown within {timeout:.0f} s; the page showed: {last}") from None


# Node labels and edges of the asset graph (edges are SVG paths ending in an arrow marker).
_GRAPH_PROBE = """
const labels = new Set();
for (const node of document.querySelectorAll('svg foreignObject:not(.group) > div')) {
  for (const line of node.innerText.split('\\n')) if (line.trim()) labels.add(line.trim());
}
return {labels: [...labels].sort(), edges: document.querySelectorAll('svg path[marker-end]').length,
        at: performance.now()};
"""

# The asset page's metadata table of the latest materialization: key -> value.
_METADATA_PROBE = """
const rows = {};
for (const row of document.querySelectorAll('tr')) {
  const cells = row.querySelectorAll('td');
  if (cells.length >= 2) rows[cells[0].innerText.trim()] = cells[cells.length - 1].innerText.trim();
}
return {rows: rows, at: performance.now()};
"""

# The headings of the Markdown shown in an open dialog.
_DIALOG_PROBE = """
const headings = [...document.querySelectorAll('[role=dialog] h1, [role=dialog] h2')].map(h => h.innerText.trim());
return {headings: headings, at: performance.now()};
"""


def asset_graph_url(server_url: str) -> str:
    """The global lineage with every group expanded (collapsed, a group shows only its name)."""
    groups = ",".join(f"global@global:{group}" for group in ("ingestion", "synthesis", "evaluation", "reporting"))
    return f"{server_url}/asset-groups?expanded={groups}"


def load_asset_graph(driver, server_url: str, assets: list[str], edges: int, timeout: float = 60.0) -> Load:
    """Load the asset graph until every asset in assets is a node and at least edges edges are drawn."""
    started = time.perf_counter()
    driver.get(asset_graph_url(server_url))
    shown = _wait_for(
        driver,
        lambda d: d.execute_script(_GRAPH_PROBE),
        lambda s: all(any(shows(label, a) for label in s["labels"]) for a in assets) and s["edges"] >= edges,
        timeout,
        f"the lineage {assets} with {edges} edges",
    )
    return Load(time.perf_counter() - started, shown.pop("at") / 1000, shown)


def shows(label: str, asset: str) -> bool:
    """The node's label is the asset's name, or that name shortened in its middle ('generati…_failures')."""
    if "…" not in label:
        return label == asset
    head, tail = label.split("…", 1)
    return len(head) + len(tail) < len(asset) and asset.startswith(head) and asset.endswith(tail)


def load_report(driver, server_url: str, asset: str, title: str, timeout: float = 60.0) -> Load:
    """Open the asset's page, wait for the latest materialization's metadata, open its Markdown report
    and wait for the report's title: the whole look-up of a trace."""
    from selenium.webdriver.common.by import By

    started = time.perf_counter()
    driver.get(f"{server_url}/assets/{asset}")
    metadata = _wait_for(
        driver,
        lambda d: d.execute_script(_METADATA_PROBE),
        lambda s: s["rows"].get("verdict") and "Markdown" in s["rows"].get("report", ""),
        timeout,
        f"the latest {asset} materialization's verdict and report",
    )
    driver.find_element(By.XPATH, "//tr[td[1][normalize-space()='report']]//a[contains(., 'Markdown')]").click()
    dialog = _wait_for(
        driver,
        lambda d: d.execute_script(_DIALOG_PROBE),
        lambda s: title in s["headings"],
        timeout,
        f"the report titled {title!r}",
    )
    shown = {
        "verdict": metadata["rows"]["verdict"],
        "metadata_s": round(metadata["at"] / 1000, 3),
        "headings": dialog["headings"],
    }
    return Load(time.perf_counter() - started, dialog["at"] / 1000, shown)


def load_peer(driver, server_url: str, timeout: float = 30.0) -> Load:
    """A trivial page of the same server (/server_info, a few bytes of JSON): the floor for a page load."""
    started = time.perf_counter()
    driver.get(f"{server_url}/server_info")
    shown = _wait_for(
        driver,
        lambda d: d.execute_script(
            "return {text: document.body ? document.body.innerText : '', at: performance.now()}"
        ),
        lambda s: "dagster_webserver_version" in s["text"],
        timeout,
        "/server_info",
    )
    return Load(time.perf_counter() - started, shown.pop("at") / 1000, shown)
