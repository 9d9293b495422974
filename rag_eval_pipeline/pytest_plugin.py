"""The pytest plugin, registered through the `pytest11` entry point: installing the package is all it takes.

It adds the options `--rag-judge offline|llm` (default: RAG_EVAL_JUDGE) and `--rag-unmeasured skip|fail`
(also the ini keys `rag_eval_judge` and `rag_eval_unmeasured`), one `RagEvaluator` per session (testing.py)
that `assert_rag` and the `rag_evaluator` fixture share, and a line in the terminal summary: how many
assertions ran, with which judge, and how many met a metric that could not be measured. Importing this
module loads nothing heavy: the judge and the embedding model load at the first assertion.
`-p no:rag_eval_pipeline` turns it off.
"""

from __future__ import annotations

import pytest

from rag_eval_pipeline.testing import UNMEASURED_POLICIES, RagEvaluator, use_evaluator

_EVALUATOR = pytest.StashKey[RagEvaluator]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rag-eval", "rag_eval_pipeline's assertions (assert_rag)")
    group.addoption("--rag-judge", choices=("offline", "llm"), help="the judge (default: RAG_EVAL_JUDGE, else offline)")
    group.addoption(
        "--rag-unmeasured",
        choices=UNMEASURED_POLICIES,
        help="what a metric the judge could not measure does to its test: skip it (default) or fail it",
    )
    parser.addini("rag_eval_judge", "the judge of assert_rag: offline or llm (default: RAG_EVAL_JUDGE)", default="")
    parser.addini("rag_eval_unmeasured", "skip (default) or fail a test whose metric is unmeasured", default="skip")


def pytest_configure(config: pytest.Config) -> None:
    judge = config.getoption("--rag-judge") or config.getini("rag_eval_judge") or None
    unmeasured = config.getoption("--rag-unmeasured") or config.getini("rag_eval_unmeasured") or "skip"
    if unmeasured not in UNMEASURED_POLICIES:
        raise pytest.UsageError(f"rag_eval_unmeasured must be skip or fail, got {unmeasured!r}")
    if judge not in (None, "offline", "llm"):
        raise pytest.UsageError(f"rag_eval_judge must be offline or llm, got {judge!r}")
    evaluator = RagEvaluator(judge=judge, unmeasured=unmeasured)
    config.stash[_EVALUATOR] = evaluator
    use_evaluator(evaluator)


def pytest_unconfigure(config: pytest.Config) -> None:
    use_evaluator(None)


@pytest.fixture(scope="session")
def rag_evaluator(request: pytest.FixtureRequest) -> RagEvaluator:
    """The session's evaluator: `rag_evaluator.assert_rag(...)`, `.prefetch(cases, metrics)`, `.assert_gate(...)`."""
    return request.config.stash[_EVALUATOR]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    evaluator = config.stash.get(_EVALUATOR, None)
    if evaluator is None or not evaluator.assertions:
        return
    terminalreporter.write_line(
        f"rag-eval: {evaluator.assertions} assertions, judge {evaluator.judge_name}; "
        f"{evaluator.unmeasured_seen} met an unmeasured metric "
        f"({'skipped' if evaluator.unmeasured == 'skip' else 'failed'}, never passed)"
    )
