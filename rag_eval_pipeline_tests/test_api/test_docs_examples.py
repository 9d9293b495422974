"""The examples of docs/python.md marked runnable run as written, offline, and assert what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_eval_pipeline.testing import RagEvaluator, use_evaluator

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)```", re.S)


def _examples() -> list[str]:
    return RUNNABLE.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_marks_its_examples():
    assert len(_examples()) == 2


@pytest.mark.parametrize("number", range(2))
def test_a_runnable_example_runs(number, tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    for variable in ("RAG_EVAL_JUDGE", "RAG_EVAL_JUDGE_BASE_URL", "RAG_EVAL_JUDGE_MODEL", "RAG_EVAL_METRICS"):
        monkeypatch.delenv(variable, raising=False)
    previous = use_evaluator(RagEvaluator())  # assert_rag's evaluator reads this test's settings
    try:
        exec(compile(_examples()[number], f"{PAGE.name} example {number + 1}", "exec"), {})
    finally:
        use_evaluator(previous)
