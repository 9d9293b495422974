"""Load times of the Dagster UI in headless Chromium, against our target: under 2 s to load the
dashboard and to look up a trace.

    .venv/bin/python benchmarks/ui_load.py [--runs 5]

Materializes the demo lineage in a temporary instance (`rag-eval demo`), starts `dagster dev` on
loopback once, and times two pages from `driver.get` until they show what a user came for:
  asset_graph  the global lineage, until every asset is a node and every dependency an edge;
  report       regression_report's page, until the latest materialization's Markdown report is open.
Cold: a fresh Chromium (empty profile and cache) for each load. Warm: one Chromium that has loaded
each page once before. Peer: /server_info (a few bytes of JSON) from the same server in the same kind
of browser, the floor of any page load here; the UI/peer ratio is less sensitive to the machine.
Every process is stopped by its PID afterwards. Writes benchmarks/results/ui_load.json.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagster import __version__ as dagster_version  # noqa: E402

from rag_eval_pipeline_tests.dagster_ui import (  # noqa: E402
    LINEAGE,
    REPORT_ASSET,
    chromium,
    dagster_dev,
    load_asset_graph,
    load_peer,
    load_report,
    prepare_instance,
    report_title,
)

RESULTS = ROOT / "benchmarks" / "results"
SLA_S = 2.0
PAGES = ["asset_graph", "report", "peer"]


def load_page(page: str, driver, server, edges: int, title: str):
    if page == "asset_graph":
        return load_asset_graph(driver, server.url, LINEAGE, edges)
    if page == "report":
        return load_report(driver, server.url, REPORT_ASSET, title)
    return load_peer(driver, server.url)


def cold_loads(server, runs: int, edges: int, title: str) -> dict[str, list]:
    """Each load in a Chromium of its own: nothing cached, no connection open."""
    loads = {page: [] for page in PAGES}
    for _ in range(runs):
        for page in PAGES:
            with chromium() as browser:
                loads[page].append(load_page(page, browser.driver, server, edges, title))
    return loads


def warm_loads(server, runs: int, edges: int, title: str) -> tuple[dict[str, list], str]:
    """One Chromium, each page loaded once untimed first; returns the loads and Chromium's version."""
    loads = {page: [] for page in PAGES}
    with chromium() as browser:
        for page in PAGES:
            load_page(page, browser.driver, server, edges, title)
        for _ in range(runs):
            for page in PAGES:
                loads[page].append(load_page(page, browser.driver, server, edges, title))
        version = browser.version
    return loads, version


def summary(loads: list) -> dict:
    walls = [round(load.wall_s, 3) for load in loads]
    browser = [round(load.browser_s, 3) for load in loads]
    figures = {
        "median_s": round(statistics.median(walls), 3),
        "max_s": max(walls),
        "runs_s": walls,
        "browser_clock_median_s": round(statistics.median(browser), 3),
        "browser_clock_runs_s": browser,
    }
    if "metadata_s" in loads[0].shown:  # the report page: when the latest materialization's metadata showed
        figures["metadata_shown_median_s"] = round(statistics.median(load.shown["metadata_s"] for load in loads), 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed loads per page and mode (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ui-load-") as scratch:
        print("materializing the demo lineage (rag-eval demo) ...", flush=True)
        env = prepare_instance(Path(scratch))
        title = report_title(env)
        load_before = os.getloadavg()
        with dagster_dev(env, Path(scratch) / "dagster_dev.log") as server:
            edges = server.lineage_edges()
            cold = cold_loads(server, args.runs, edges, title)
            warm, chromium_version = warm_loads(server, args.runs, edges, title)
        load_after = os.getloadavg()
    modes = {
        "cold": {page: summary(loads) for page, loads in cold.items()},
        "warm": {page: summary(loads) for page, loads in warm.items()},
    }
    verdicts = {
        f"{page}_{mode}": "pass" if modes[mode][page]["median_s"] < SLA_S else "fail"
        for mode in modes
        for page in ("asset_graph", "report")
    }
    figures = {
        "sla_s": SLA_S,
        "sla": {**verdicts, "all": "pass" if set(verdicts.values()) == {"pass"} else "fail"},
        "runs": args.runs,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_1m": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        },
        "dagster": dagster_version,
        "chromium": chromium_version,
        "lineage": {"assets": len(LINEAGE), "edges": edges},
        "ratio_to_peer": {
            mode: {
                page: round(modes[mode][page]["median_s"] / modes[mode]["peer"]["median_s"], 1)
                for page in ("asset_graph", "report")
            }
            for mode in modes
        },
        **modes,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "ui_load.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
