"""The Dagster UI in headless Chromium: the asset graph shows the lineage, the report's page shows the
latest report, and every process (dagster dev's and Chromium's) is stopped by its PID afterwards.

Load times are logged, not asserted: the 2 s SLA is checked by benchmarks/ui_load.py.
"""

import logging

import pytest

from rag_eval_pipeline_tests.dagster_ui import (
    LINEAGE,
    REPORT_ASSET,
    alive,
    chromium,
    dagster_dev,
    declared_lineage,
    load_asset_graph,
    load_report,
    prepare_instance,
    report_title,
    require_chromium,
    shows,
)

pytestmark = [pytest.mark.ui, pytest.mark.dagster, pytest.mark.cli]

log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def instance_env(tmp_path_factory):
    """A fresh instance with the demo lineage materialized (`rag-eval demo`, about half a minute)."""
    require_chromium()  # fail before the slow part; `make test` installs it
    return prepare_instance(tmp_path_factory.mktemp("ui"))


@pytest.fixture(scope="module")
def server(instance_env, tmp_path_factory):
    with dagster_dev(instance_env, tmp_path_factory.mktemp("dagster-dev") / "dagster_dev.log") as running:
        yield running
    assert not alive(running.procs), "dagster dev left processes running"


@pytest.fixture(scope="module")
def browser():
    with chromium() as running:
        yield running
    assert not alive(running.procs), "Chromium left processes running"


def test_dagster_dev_runs_its_services_in_processes_we_track(server):
    # dagster dev itself, the webserver, the daemon and a code server at least: all must be stopped.
    assert len(alive(server.procs)) >= 4, server.procs


def test_asset_graph_shows_the_lineage(server, browser):
    assets, declared_edges = declared_lineage()
    assert set(LINEAGE) == assets  # every table the README lists, and nothing else
    edges = server.lineage_edges()
    assert edges == declared_edges  # what the server serves is what the definitions declare

    load = load_asset_graph(browser.driver, server.url, LINEAGE, edges)

    assert all(any(shows(label, asset) for label in load.shown["labels"]) for asset in LINEAGE)
    assert load.shown["edges"] >= edges
    log.info("asset graph shown in %.2f s (browser clock %.2f s)", load.wall_s, load.browser_s)


def test_report_page_shows_the_latest_report(server, browser, instance_env):
    title = report_title(instance_env)
    assert title.startswith("Regression report")

    load = load_report(browser.driver, server.url, REPORT_ASSET, title)

    assert title in load.shown["headings"]
    assert load.shown["verdict"]
    log.info("%s report shown in %.2f s (browser clock %.2f s)", REPORT_ASSET, load.wall_s, load.browser_s)
