"""The metric history page in headless Chromium: one line per metric, the promotions marked, the blocked commit
highlighted, and every point's link opening its report.

The audits are stored as regression_report stores them (support/history.py), in a local warehouse; the page is
what `rag-eval history` writes. Chromium is stopped by its PID afterwards (dagster_ui.chromium).
"""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from rag_eval_pipeline.reporting.baselines import EXPLICIT
from rag_eval_pipeline.reporting.history import render_history_html, tenant_history
from rag_eval_pipeline.stores import open_stores
from rag_eval_pipeline_tests.dagster_ui import alive, chromium, require_chromium
from rag_eval_pipeline_tests.support.history import METRICS, Planned, publish_version, store_audits

pytestmark = [pytest.mark.ui]


def _means(value: float, **overrides: float) -> dict[str, float]:
    return {metric: overrides.get(metric, value) for metric in METRICS}


PLAN = [
    Planned("c1-base", _means(0.8), promote=True),
    Planned("c2-good", _means(0.81), promote=True),
    Planned("c3-blocked", _means(0.81, hit_rate=0.4, mrr=0.3), promote=True),
    Planned("c4-same", _means(0.8)),
    Planned("c5-person", _means(0.79), promote=EXPLICIT),
]

# What the page draws, read from the live DOM.
PROBE = """
const panels = [...document.querySelectorAll('svg.panel')];
return {
  lines: [...document.querySelectorAll('path.metric-line')].map(p => [p.dataset.metric, p.getAttribute('d').split('L').length]),
  panels: panels.map(p => p.dataset.metric),
  promoted: [...document.querySelectorAll('svg.strip path.promotion')].map(p => p.dataset.commit),
  blocked: [...document.querySelectorAll('svg.strip circle.blocked')].map(c => c.dataset.commit),
  blockedBands: document.querySelectorAll('rect.blocked-band').length,
  promotionLines: document.querySelectorAll('line.promotion-line').length,
  bands: document.querySelectorAll('path.tolerance-band').length,
  blockedRows: [...document.querySelectorAll('table.audits tr.blocked')].map(r => r.dataset.commit),
  blockedRowColor: getComputedStyle(document.querySelector('table.audits tr.blocked td')).backgroundColor,
  links: [...new Set([...document.querySelectorAll('a.point-link')].map(a => a.getAttribute('href')))],
  pointsPerLink: document.querySelectorAll('a.point-link').length,
  scripts: document.scripts.length,
  resources: performance.getEntriesByType('resource').length,
};
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    require_chromium()
    root = tmp_path_factory.mktemp("history-page")
    stores = open_stores(root / "warehouse")
    publish_version(stores.results, "acme", "v1")
    store_audits(stores.results, stores.baselines, "acme", "v1", PLAN)
    path = root / "history-acme.html"
    path.write_text(render_history_html(tenant_history(stores.results, stores.baselines, "acme")), encoding="utf-8")
    return path


def test_the_history_page_in_chromium(page):
    with chromium() as browser:
        driver = browser.driver
        driver.get(page.as_uri())
        shown = driver.execute_script(PROBE)
        reports = {}
        for link in shown["links"]:
            driver.get(link)
            reports[link] = driver.find_element("tag name", "h1").text
    assert not alive(browser.procs)

    assert shown["panels"] == list(METRICS)
    assert [(metric, points) for metric, points in shown["lines"]] == [(metric, len(PLAN)) for metric in METRICS]
    assert shown["promoted"] == ["c1-base", "c2-good", "c5-person"]  # c3 blocked and c4 unpromoted
    assert shown["promotionLines"] == 3 * len(METRICS)
    assert shown["blocked"] == ["c3-blocked"] and shown["blockedRows"] == ["c3-blocked"]
    assert shown["blockedBands"] == len(METRICS)
    assert shown["blockedRowColor"] == "rgb(253, 231, 233)"  # highlighted
    assert shown["bands"] == len(METRICS)  # the tolerance band, from the second audit on
    assert shown["scripts"] == 0 and shown["resources"] == 0  # nothing fetched: self-contained
    assert shown["pointsPerLink"] == len(PLAN) * len(METRICS)
    assert len(reports) == len(PLAN)  # each audit's points link to its own report, which opens
    for link, heading in reports.items():
        commit = heading.rsplit("commit ", 1)[-1]
        assert heading.startswith("Regression report: acme / v1 / commit ") and f"commit={commit}/" in unquote(link)
