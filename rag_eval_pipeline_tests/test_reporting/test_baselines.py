"""Baselines: audited candidates archived by commit, promotions kept as history, and when a candidate is promoted."""

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import pandas as pd
import pytest

from rag_eval_pipeline.reporting.baselines import EXPLICIT, FIRST_RUN, PromotionPolicy, passed_on, promotion_reason
from rag_eval_pipeline.reporting.compare import BLOCK, NO_BASELINE, NOTHING_SCORED, PASS, UNMEASURED
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.stores.local_baselines import LocalBaselineStore
from rag_eval_pipeline.stores.protocols import BaselineChanged, UnknownBaseline


def _scores(commit: str, score: float) -> pd.DataFrame:
    return pd.DataFrame({"qa_id": ["q1", "q2"], "metric": "mrr", "score": score, "status": "ok", "commit": commit})


def _outputs(commit: str) -> pd.DataFrame:
    return pd.DataFrame({"qa_id": ["q1", "q2"], "answer": f"answer of {commit}", "commit": commit})


@pytest.fixture
def store(tmp_path) -> LocalBaselineStore:
    return LocalBaselineStore(Warehouse(tmp_path))


def test_archived_scores_come_back_by_commit(store):
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"))
    store.archive("acme", "v1", "feature/x", _scores("feature/x", 0.9), _outputs("feature/x"))
    assert store.audited_commits("acme", "v1") == ["abc1234", "feature/x"]  # a slash is kept, not a folder
    scores, outputs = store.audited("acme", "v1", "feature/x")
    assert scores["score"].tolist() == [0.9, 0.9] and set(outputs["answer"]) == {"answer of feature/x"}
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.7), _outputs("abc1234"))  # audited again
    assert store.audited("acme", "v1", "abc1234")[0]["score"].tolist() == [0.7, 0.7]
    assert store.audited_commits("acme", "v2") == []


def test_a_commit_named_like_a_parent_folder_stays_inside(store, tmp_path):
    store.archive("acme", "v1", "..", _scores("..", 0.5), _outputs(".."))
    assert store.audited_commits("acme", "v1") == [".."]
    assert not (tmp_path / "acme" / "metric_scores.parquet").exists()


def test_an_unaudited_baseline_is_refused_naming_the_audited_ones(store):
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"))
    with pytest.raises(UnknownBaseline, match=r"'ffff000' was never audited on acme/v1.*audited commits: abc1234"):
        store.audited("acme", "v1", "ffff000")
    with pytest.raises(UnknownBaseline, match="never audited"):
        store.promote("acme", "v1", "ffff000", EXPLICIT)
    assert store.history("acme") == []  # a refused promotion writes nothing


def test_history_keeps_every_promotion_and_the_last_is_current(store, tmp_path):
    for commit in ("aaa1111", "bbb2222"):
        store.archive("acme", "v1", commit, _scores(commit, 0.5), _outputs(commit))
    store.archive("acme", "v2", "ccc3333", _scores("ccc3333", 0.5), _outputs("ccc3333"))
    store.promote("acme", "v1", "aaa1111", FIRST_RUN, run_id="r1")
    store.promote("acme", "v2", "ccc3333", FIRST_RUN)
    store.promote("acme", "v1", "bbb2222", passed_on("main"), branch="main", run_id="r2")

    assert store.current("acme", "v1").commit == "bbb2222"
    assert store.current("acme", "v2").commit == "ccc3333"
    assert store.current("acme", "v3") is None and store.current("globex", "v1") is None
    assert [p.commit for p in store.history("acme")] == ["aaa1111", "ccc3333", "bbb2222"]
    assert [(p.reason, p.branch, p.run_id) for p in store.history("acme", "v1")] == [
        (FIRST_RUN, "", "r1"),
        ("passed the gate on main", "main", "r2"),
    ]
    # One file per tenant, in the warehouse, readable without this code.
    assert len((tmp_path / "acme" / "baseline_history.jsonl").read_text().splitlines()) == 3


MAIN = PromotionPolicy(branch="main")


@pytest.mark.parametrize(
    "verdict, measured, had_baseline, policy, expected",
    [
        (NO_BASELINE, True, False, MAIN, FIRST_RUN),
        # Only the followed branch sets a baseline: a pull request's or a local gate's first audit does not.
        (NO_BASELINE, True, False, PromotionPolicy(branch="feature-x"), None),
        (NO_BASELINE, True, False, PromotionPolicy(), None),
        (NO_BASELINE, True, False, PromotionPolicy(first_audit_is_baseline=True), FIRST_RUN),  # rag-eval run / demo
        (PASS, True, True, MAIN, "passed the gate on main"),
        (PASS, True, True, PromotionPolicy(branch="feature-x"), None),  # passing on a pull request proposes nothing
        (PASS, True, True, PromotionPolicy(), None),
        (BLOCK, True, True, MAIN, None),  # a blocked candidate never replaces the baseline by itself
        (
            BLOCK,
            True,
            True,
            PromotionPolicy(branch="feature-x", explicit=True),
            EXPLICIT,
        ),  # but a person may promote it
        # An explicit --baseline is for comparison only: a pass against it on main moves nothing.
        (PASS, True, True, PromotionPolicy(branch="main", baseline_requested=True), None),
        # Nothing is promoted unless every metric that applies was measured on enough items.
        (NO_BASELINE, False, False, MAIN, None),
        (UNMEASURED, False, True, MAIN, None),
        (UNMEASURED, False, True, PromotionPolicy(explicit=True), None),
        (NOTHING_SCORED, False, False, MAIN, None),
    ],
)
def test_when_a_candidate_becomes_the_baseline(verdict, measured, had_baseline, policy, expected):
    assert promotion_reason(verdict, measured, had_baseline, policy) == expected


def test_the_main_branch_is_configurable():
    assert (
        promotion_reason(PASS, True, True, PromotionPolicy(branch="trunk", main_branch="trunk"))
        == "passed the gate on trunk"
    )
    assert promotion_reason(PASS, True, True, PromotionPolicy(branch="main", main_branch="trunk")) is None


# ---- audits kept per commit and run; promotions serialized per tenant --------------------------


def test_an_audit_is_a_baseline_only_once_its_marker_is_written(store, tmp_path):
    """A run killed between writing its scores and archiving them is not an audit anyone compares with."""
    folder = store.warehouse.audit_dir("acme", "v1", "abc1234", "run-1")
    folder.mkdir(parents=True)
    _scores("abc1234", 0.5).to_parquet(folder / "metric_scores.parquet")
    _outputs("abc1234").to_parquet(folder / "candidate_outputs.parquet")
    assert store.audited_commits("acme", "v1") == []
    with pytest.raises(UnknownBaseline):
        store.audited("acme", "v1", "abc1234")


def test_the_latest_complete_audit_of_a_commit_is_the_one_compared_with(store):
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"), run_id="run-b")
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.8), _outputs("abc1234"), run_id="run-a")
    assert store.audited("acme", "v1", "abc1234")[0]["score"].tolist() == [0.8, 0.8]  # by time, not by run id
    assert len(list(store.warehouse.commit_dir("acme", "v1", "abc1234").iterdir())) == 2  # both audits kept


def test_a_promotion_checks_the_baseline_it_was_compared_with(store):
    for commit in ("aaa1111", "bbb2222", "ccc3333"):
        store.archive("acme", "v1", commit, _scores(commit, 0.5), _outputs(commit))
    store.promote("acme", "v1", "aaa1111", FIRST_RUN, expected_current=None)
    store.promote("acme", "v1", "bbb2222", passed_on("main"), expected_current="aaa1111")
    with pytest.raises(BaselineChanged, match="changed from aaa1111 to bbb2222"):
        store.promote("acme", "v1", "ccc3333", passed_on("main"), expected_current="aaa1111")
    with pytest.raises(BaselineChanged, match="changed from none to bbb2222"):
        store.promote("acme", "v1", "ccc3333", FIRST_RUN, expected_current=None)
    assert [p.commit for p in store.history("acme", "v1")] == ["aaa1111", "bbb2222"]  # refused ones wrote nothing


def _read_then_promote(root: str, commit: str) -> str:
    """What a gate does: read the current baseline, compare (slowly), promote if it is still current."""
    store = LocalBaselineStore(Warehouse(root))
    with store.locked("acme"):
        current = store.current("acme", "v1")
        time.sleep(0.05)  # the comparison: long enough for an unserialized neighbour to slip in
        store.promote("acme", "v1", commit, passed_on("main"), expected_current=current.commit if current else None)
    return commit


def test_promotions_from_concurrent_processes_are_serialized(store, tmp_path):
    commits = [f"c{n}" for n in range(6)]
    for commit in commits:
        store.archive("acme", "v1", commit, _scores(commit, 0.5), _outputs(commit))
    with ProcessPoolExecutor(max_workers=6, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_read_then_promote, [str(tmp_path)] * len(commits), commits))
    assert sorted(done) == commits
    assert sorted(p.commit for p in store.history("acme", "v1")) == commits  # none lost, none twice


def test_audits_archived_in_the_earlier_layout_remain_baselines(store):
    """A warehouse from before audits were kept per run: its history's baseline must still be found."""
    legacy = store.warehouse.partition_dir("acme", "v1") / "audited" / "commit=old1234"
    legacy.mkdir(parents=True)
    _scores("old1234", 0.6).to_parquet(legacy / "metric_scores.parquet")
    _outputs("old1234").to_parquet(legacy / "candidate_outputs.parquet")
    store.archive("acme", "v1", "new5678", _scores("new5678", 0.5), _outputs("new5678"), run_id="r1")
    assert store.audited_commits("acme", "v1") == ["new5678", "old1234"]
    assert store.audited("acme", "v1", "old1234")[0]["score"].tolist() == [0.6, 0.6]
    store.archive("acme", "v1", "old1234", _scores("old1234", 0.9), _outputs("old1234"), run_id="r2")
    assert store.audited("acme", "v1", "old1234")[0]["score"].tolist() == [0.9, 0.9]  # a new audit wins


def test_the_promoted_audit_is_the_baseline_not_a_later_reaudit(store):
    """A re-audit of the baseline commit (say with its service down) must not become what others are compared with."""
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.9), _outputs("abc1234"), run_id="good-run")
    store.promote("acme", "v1", "abc1234", FIRST_RUN, run_id="good-run")
    store.archive("acme", "v1", "abc1234", _scores("abc1234", 0.1), _outputs("abc1234"), run_id="broken-run")
    promoted = store.current("acme", "v1")
    assert store.audited("acme", "v1", "abc1234", promoted.run_id)[0]["score"].tolist() == [0.9, 0.9]
    assert store.audited("acme", "v1", "abc1234")[0]["score"].tolist() == [0.1, 0.1]  # asked for by commit: the latest
    # An explicit promotion records which audit it promotes.
    store.promote("acme", "v1", "abc1234", EXPLICIT)
    assert store.current("acme", "v1").run_id == "broken-run"


# ---- a damaged history ----------------------------------------------------------------------------


def test_a_torn_last_line_is_not_a_promotion_and_the_next_promotion_starts_on_a_line_of_its_own(store, tmp_path):
    """A writer killed while appending (as versions before the atomic rewrite did) left half a line: gates
    exited 2 without naming the file, and `baseline promote` appended to the torn line."""
    for commit in ("aaa1111", "bbb2222"):
        store.archive("acme", "v1", commit, _scores(commit, 0.5), _outputs(commit))
    store.promote("acme", "v1", "aaa1111", FIRST_RUN, run_id="r1")
    path = tmp_path / "acme" / "baseline_history.jsonl"
    with path.open("a", encoding="utf-8") as history:
        history.write('{"branch": "main", "commit": "bbb22')  # killed mid-write: no closing brace, no newline

    assert [p.commit for p in store.history("acme")] == ["aaa1111"]
    assert store.current("acme", "v1").commit == "aaa1111"

    store.promote("acme", "v1", "bbb2222", EXPLICIT)

    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(line.startswith("{") and line.endswith("}") for line in lines)
    assert [p.commit for p in store.history("acme", "v1")] == ["aaa1111", "bbb2222"]


def test_a_damaged_line_inside_the_history_names_the_file_and_line(store, tmp_path):
    store.archive("acme", "v1", "aaa1111", _scores("aaa1111", 0.5), _outputs("aaa1111"))
    store.promote("acme", "v1", "aaa1111", FIRST_RUN)
    path = tmp_path / "acme" / "baseline_history.jsonl"
    path.write_text("not json\n" + path.read_text(encoding="utf-8"), encoding="utf-8")

    with pytest.raises(ValueError, match=r"baseline history .*baseline_history\.jsonl, line 1, is not a promotion"):
        store.current("acme", "v1")
    with pytest.raises(ValueError, match="line 1"):
        store.promote("acme", "v1", "aaa1111", EXPLICIT)  # nothing is written over damage
    assert path.read_text(encoding="utf-8").startswith("not json\n")
