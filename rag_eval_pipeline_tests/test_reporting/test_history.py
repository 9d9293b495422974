"""The metric history: the points a store's audits give (promotions, a blocked commit, a re-scored baseline),
what the judging cost, and the HTML page, read here and in headless Chromium.

The audits are stored without a Dagster run, as regression_report stores them (support/history.py: the real
compare, report and stores), so these tests take seconds; test_dagster/test_history_gates.py runs real gates.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.judging.llm_judge import call_serves
from rag_eval_pipeline.core.metrics.registry import resolve
from rag_eval_pipeline.reporting import cost
from rag_eval_pipeline.reporting.baselines import EXPLICIT, FIRST_RUN, passed_on
from rag_eval_pipeline.reporting.compare import BLOCKS, PASSES
from rag_eval_pipeline.reporting.history import NoHistory, render_history_html, summary_line, tenant_history
from rag_eval_pipeline.stores import open_stores
from rag_eval_pipeline_tests.support.history import Planned, publish_version, store_audits

METRICS = ("faithfulness", "hit_rate", "mrr")
LLM_JUDGE = "llm:gpt-x:decomposed:prompt-0123abcd"
PRICES = {"gpt-x": (1.0, 2.0)}
HOSTILE = "feat/<i>x</i>"  # a commit name is printable text: it must come out escaped


def _means(value: float, **overrides: float) -> dict[str, float]:
    return {metric: overrides.get(metric, value) for metric in METRICS}


PLAN = [
    Planned("base", _means(0.8), promote=True),  # the first audit: proposed baseline
    Planned("good", _means(0.82), promote=True),  # passes on main: promoted
    Planned("bad", _means(0.82, faithfulness=0.5), promote=True),  # blocked: never promoted
    Planned(
        HOSTILE,
        _means(0.83),
        judge=LLM_JUDGE,
        rescored=True,
        tokens={"faithfulness": (20, 2000, 300), "hit_rate": (0, 0, 0), "mrr": (0, 0, 0)},
        rescoring=(20, 1900, 280),
        promote=EXPLICIT,
    ),
]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A local warehouse whose acme/v1 went through PLAN (and globex/v1 through one audit of its own)."""
    root = tmp_path_factory.mktemp("history")
    stores = open_stores(root / "warehouse")
    for tenant in ("acme", "globex"):
        publish_version(stores.results, tenant, "v1")
    runs = store_audits(stores.results, stores.baselines, "acme", "v1", PLAN)
    store_audits(stores.results, stores.baselines, "globex", "v1", [Planned("globex-only", _means(0.7))])
    return stores, runs, root


def test_each_audit_is_a_point_with_what_its_report_said(audited):
    stores, runs, _ = audited
    history = tenant_history(stores.results, stores.baselines, "acme", prices=PRICES)

    assert history.version == "v1" and history.metrics == list(METRICS)
    assert [(p.commit, p.run_id) for p in history.points] == [(planned.commit, run) for planned, run in zip(PLAN, runs)]
    assert [p.outcome for p in history.points] == [PASSES, PASSES, BLOCKS, PASSES]
    assert [p.commit for p in history.blocked] == ["bad"]
    assert [p.baseline_commit for p in history.points] == ["none", "base", "good", "good"]  # bad never promoted
    assert [p.rescored for p in history.points] == [False, False, False, True]

    good, bad, hostile = history.points[1], history.points[2], history.points[3]
    assert good.metrics["faithfulness"].delta == pytest.approx(0.02)
    faithfulness = bad.metrics["faithfulness"]
    assert (faithfulness.candidate_mean, faithfulness.baseline_mean) == (0.5, 0.82)
    assert faithfulness.delta == pytest.approx(-0.32) and faithfulness.verdict == "regressed"
    assert (faithfulness.tolerance, faithfulness.coverage) == (0.05, 1.0)
    assert bad.metrics["hit_rate"].verdict == "ok" and hostile.metrics["mrr"].delta == pytest.approx(0.01)
    assert history.points[0].metrics["mrr"].baseline_mean is None  # no baseline to compare with yet

    promoted = [(point.commit, promotion.reason) for point, promotion in history.promoted_points()]
    assert promoted == [("base", FIRST_RUN), ("good", passed_on("main")), (HOSTILE, EXPLICIT)]
    assert history.earlier_promotions() == []


def test_tokens_and_cost_per_metric_and_per_run(audited):
    stores, _, _ = audited
    history = tenant_history(stores.results, stores.baselines, "acme", prices=PRICES)
    offline, llm = history.points[0], history.points[3]

    assert offline.tokens == cost.TokenCount() and offline.cost == 0.0  # the offline judge: 0 tokens, and says so
    assert llm.metrics["faithfulness"].tokens == cost.TokenCount(20, 2000, 300)
    assert llm.metrics["faithfulness"].cost == pytest.approx(2000 / 1000 * 1.0 + 300 / 1000 * 2.0)
    assert llm.tokens == cost.TokenCount(40, 3900, 580)  # the metrics' and the baseline's re-scoring
    assert llm.cost == pytest.approx(3.9 + 1.16)
    assert "gpt-x" in history.cost_note

    unpriced = tenant_history(stores.results, stores.baselines, "acme")
    assert unpriced.points[3].cost is None and unpriced.points[0].cost == 0.0
    assert "no price table" in unpriced.cost_note


def test_the_latest_n_audits_and_the_promotions_before_them(audited):
    stores, _, _ = audited
    history = tenant_history(stores.results, stores.baselines, "acme", "v1", limit=2)
    assert [p.commit for p in history.points] == ["bad", HOSTILE]
    assert [p.commit for p in history.earlier_promotions()] == ["base", "good"]
    assert summary_line(history) == "metric history of acme/v1: 2 audits, 1 blocked, 1 promotion, 3 metrics"


def test_one_tenants_history_holds_none_of_anothers_audits(audited):
    stores, _, _ = audited
    acme = tenant_history(stores.results, stores.baselines, "acme")
    globex = tenant_history(stores.results, stores.baselines, "globex")
    assert "globex-only" not in {p.commit for p in acme.points}
    assert [p.commit for p in globex.points] == ["globex-only"]
    assert "globex-only" not in render_history_html(acme)


@pytest.mark.parametrize(
    "tenant, version, limit, message",
    [
        ("initech", None, 100, "tenant 'initech' has no published golden set"),
        ("acme", "v9", 100, "acme/v9 has no stored report yet"),
        ("acme", None, 0, "limit must be 1 to 10,000 audits, got 0"),
        ("ACME", None, 100, "invalid tenant name 'ACME'"),
    ],
)
def test_nothing_to_draw_is_one_line(audited, tenant, version, limit, message):
    stores, _, _ = audited
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        tenant_history(stores.results, stores.baselines, tenant, version, limit)
    assert "\n" not in str(raised.value)
    assert raised.type is not NoHistory or limit > 0


class _Page(HTMLParser):
    """What the page loads and links: tags that fetch something, and every href."""

    def __init__(self) -> None:
        super().__init__()
        self.fetching: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if tag in ("script", "img", "iframe", "link", "object", "embed") or "src" in values:
            self.fetching.append(tag)
        if "href" in values:
            self.hrefs.append(values["href"] or "")


def test_the_page_is_self_contained_and_escapes_what_it_shows(audited):
    stores, runs, _ = audited
    html = render_history_html(tenant_history(stores.results, stores.baselines, "acme", prices=PRICES))
    page = _Page()
    page.feed(html)
    assert page.fetching == []  # no script, image, stylesheet or frame: nothing fetched
    assert "http://" not in html and "https://" not in html
    assert HOSTILE not in html and "feat/&lt;i&gt;x&lt;/i&gt;" in html
    assert len(re.findall(r'<path class="metric-line"', html)) == len(METRICS)
    reports = {href for href in page.hrefs if href.startswith("file://")}
    assert len(reports) == len(PLAN)  # one report per audit
    for href in reports:
        assert Path(url2pathname(urlparse(href).path)).is_file()


def test_the_price_table_in_a_json_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-x": {"prompt_per_1k": 0.5, "completion_per_1k": 1.5}}))
    assert settings.load({"RAG_EVAL_PRICE_TABLE": str(path)}).judge.price_table == {"gpt-x": (0.5, 1.5)}
    path.write_text(json.dumps({"gpt-x": {"prompt_per_1k": -1, "completion_per_1k": 1}}))
    with pytest.raises(settings.SettingsError, match=r"RAG_EVAL_PRICE_TABLE file .* must map each model"):
        settings.load({"RAG_EVAL_PRICE_TABLE": str(path)})


@pytest.mark.parametrize("price", ["1e308", "1000001", "inf", "-0.1"])
def test_a_price_no_cost_could_be_drawn_with_is_refused(price):
    """A reported defect: a finite but huge price made a run's cost infinite, and the history's JSON failed."""
    with pytest.raises(settings.SettingsError, match=r"RAG_EVAL_PRICE_TABLE must be .* from 0 to 1,000,000"):
        settings.load({"RAG_EVAL_PRICE_TABLE": f"gpt-x={price}:1"})
    top = settings.load({"RAG_EVAL_PRICE_TABLE": "gpt-x=1000000:1000000"}).judge.price_table
    assert top == {"gpt-x": (1e6, 1e6)}


def test_a_call_serving_several_metrics_is_split_among_them():
    metrics = resolve(["faithfulness", "answer_relevance", "hit_rate"])
    serves = call_serves(metrics)
    usage = {kind: {"calls": 3, "prompt_tokens": 1001, "completion_tokens": 10} for kind in serves}
    split = cost.split_usage(usage, serves, [metric.name for metric in metrics])
    assert split.per_metric["hit_rate"] == cost.TokenCount()  # no judge call
    assert split.total == cost.TokenCount(3 * len(serves), 1001 * len(serves), 10 * len(serves))  # nothing lost
    shared = [kind for kind, names in serves.items() if len(names) > 1]
    assert shared, serves  # the answer call serves faithfulness and answer relevance both
    assert cost.judge_model("llm:org/model:v1:decomposed:prompt-ab12+team@3") == "org/model:v1"
    assert cost.judge_model("offline-support-v3") is None
