"""The report of one audited run, built and written without Dagster."""

from __future__ import annotations

from rag_eval_pipeline.reporting.compare import analyse, compare
from rag_eval_pipeline.reporting.report import HTML_FILE, MARKDOWN_FILE, Audit, Outcome, build_report, judges_of
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline_tests.test_reporting.test_analysis import GOLDEN, frame

SCRIPT = "<script>alert('x')</script>"


def _report(tmp_path, promotion=None, trace_url="", traced=False):
    metrics = ["hit_rate", "faithfulness"]
    baseline = frame({q: {m: 1.0 for m in metrics} for q in GOLDEN["qa_id"]})
    candidate = frame({q: {"hit_rate": 0.0, "faithfulness": 0.2} for q in GOLDEN["qa_id"]})
    if traced:  # each item's judge span, as a traced run records it
        candidate = candidate.assign(
            trace_id=candidate["qa_id"].map(lambda q: f"trace-of-{q}"),
            span_id=candidate["qa_id"].map(lambda q: f"span-of-{q}" if q != GOLDEN["qa_id"].iloc[0] else ""),
        )
    outputs = GOLDEN[["qa_id", "question"]].assign(answer=f"the answer {SCRIPT}")
    comparison = compare(candidate, baseline)
    analysis = analyse(comparison, candidate, baseline, GOLDEN, outputs, outputs.assign(answer="old"))
    folder = Warehouse(tmp_path).report_location("acme", "v1", "abc123", "run-1")
    audit = Audit("acme", "v1", "abc123", "run-1", folder, judges_of(candidate), trace_url)
    return build_report(audit, Outcome("base42", "current baseline", comparison, analysis, promotion))


def test_the_report_carries_the_verdict_the_baseline_and_where_its_files_go(tmp_path):
    report = _report(tmp_path)

    assert report.summary["verdict"] == "block" and report.summary["commit"] == "abc123"
    assert report.summary["failing_metrics"] == "hit_rate, faithfulness"
    assert report.summary["baseline"] == "base42 (current baseline)" and report.summary["promoted_to_baseline"] == "no"
    folder = Warehouse(tmp_path).audit_dir("acme", "v1", "abc123", "run-1")
    assert report.summary["report_path"] == str(folder / MARKDOWN_FILE)
    assert set(report.table["verdict_overall"]) == {"block"} and set(report.table["baseline_commit"]) == {"base42"}
    assert set(report.table["promoted_to_baseline"]) == {""}
    assert "- judge: j" in report.markdown and "- baseline commit: base42" in report.markdown
    assert all(isinstance(value, str) for value in report.summary.values())


def test_a_candidates_script_in_an_answer_comes_out_escaped(tmp_path):
    report = _report(tmp_path)

    assert "<script" not in report.html.lower()
    assert "the answer &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in report.html
    assert "the answer &lt;script&gt;" in report.markdown and "<script" not in report.markdown


def test_writing_puts_both_files_in_the_audit_folder_and_nothing_else(tmp_path):
    report = _report(tmp_path, promotion="passed on main")

    Warehouse(tmp_path).write_report("acme", "v1", "abc123", "run-1", report.stored(), {})

    folder = Warehouse(tmp_path).audit_dir("acme", "v1", "abc123", "run-1")
    assert sorted(p.name for p in folder.iterdir()) == sorted([MARKDOWN_FILE, HTML_FILE])  # no partial file left
    assert (folder / MARKDOWN_FILE).read_text(encoding="utf-8") == report.markdown
    assert (folder / HTML_FILE).read_text(encoding="utf-8") == report.html
    assert report.summary["promoted_to_baseline"] == "passed on main"


def test_the_judge_names_are_listed_once_each():
    scores = frame({"q0": {"mrr": 1.0}, "q1": {"mrr": 0.5}})
    assert judges_of(scores.assign(judge=["b", "a"])) == "a, b"
    assert judges_of(scores.assign(judge=None)) == "unknown"


def test_a_worst_items_trace_is_named_and_linked_into_phoenix_only_when_its_url_is_set(tmp_path):
    untraced = _report(tmp_path)
    assert "trace:" not in untraced.markdown and "redirects/" not in untraced.html
    named = _report(tmp_path, traced=True)
    assert "   - trace: trace-of-" in named.markdown and "redirects/" not in named.markdown
    linked = _report(tmp_path, traced=True, trace_url="http://127.0.0.1:6006/")
    links = [line for line in linked.markdown.splitlines() if line.startswith("   - trace: [")]
    assert len(links) == len(linked.markdown.split("   - evidence: ")) - 1  # one trace line per worst item
    for line in links:
        qa_id = line.split("[trace-of-", 1)[1].split("]", 1)[0]
        # The item's own span when it has one (Phoenix opens the run's trace there), else its trace.
        if qa_id == GOLDEN["qa_id"].iloc[0]:
            target = f"http://127.0.0.1:6006/redirects/traces/trace-of-{qa_id}"
        else:
            target = f"http://127.0.0.1:6006/redirects/spans/span-of-{qa_id}"
        assert line == f"   - trace: [trace-of-{qa_id}]({target})"
        assert f'<a href="{target}">trace-of-{qa_id}</a>' in linked.html


def test_each_worst_item_keeps_its_own_lines_traced_or_not(tmp_path):
    """A reported defect: the trace line's whitespace control joined an item's evidence to the next item."""
    for report in (_report(tmp_path), _report(tmp_path, traced=True, trace_url="http://127.0.0.1:6006")):
        lines = report.markdown.splitlines()
        items = [i for i, line in enumerate(lines) if line[:1].isdigit() and ". **" in line]
        assert len(items) >= 2
        for start in items:
            assert [line.split(":", 1)[0] for line in lines[start + 1 : start + 5]] == [
                "   - question",
                "   - baseline answer",
                "   - candidate answer",
                "   - evidence",
            ]
            assert lines[start + 4].count(" - ") == 1  # nothing of the next line joined to the evidence
