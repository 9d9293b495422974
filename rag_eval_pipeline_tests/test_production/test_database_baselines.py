"""Baselines in the results database behave as the file-based ones: by commit and run, compare-and-set
promotions, serialized across processes. Each test has a tenant of its own in the session's database."""

import multiprocessing
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from rag_eval_pipeline.reporting.baselines import EXPLICIT, FIRST_RUN, passed_on
from rag_eval_pipeline.stores.database.baselines import DatabaseBaselineStore
from rag_eval_pipeline.stores.database.connection import open_results_database
from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.stores.protocols import BaselineChanged, UnknownBaseline
from rag_eval_pipeline_tests.test_reporting.test_baselines import _outputs, _scores

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def tenant() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(upgraded_database) -> DatabaseBaselineStore:
    return DatabaseBaselineStore(DatabaseStore(open_results_database(upgraded_database.app_url)))


def test_archived_scores_come_back_by_commit_and_run(store, tenant):
    store.archive(tenant, "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"), run_id="r1")
    store.archive(tenant, "v1", "feature/x", _scores("feature/x", 0.9), _outputs("feature/x"), run_id="r2")
    assert store.audited_commits(tenant, "v1") == ["abc1234", "feature/x"]
    scores, outputs = store.audited(tenant, "v1", "feature/x")
    assert scores["score"].tolist() == [0.9, 0.9] and set(outputs["answer"]) == {"answer of feature/x"}
    store.archive(tenant, "v1", "abc1234", _scores("abc1234", 0.7), _outputs("abc1234"), run_id="r3")
    assert store.audited(tenant, "v1", "abc1234")[0]["score"].tolist() == [0.7, 0.7]  # the latest audit
    assert store.audited(tenant, "v1", "abc1234", "r1")[0]["score"].tolist() == [0.5, 0.5]  # or the one named
    assert store.audited_commits(tenant, "v2") == []


def test_an_unaudited_baseline_is_refused_and_nothing_is_written(store, tenant):
    store.archive(tenant, "v1", "abc1234", _scores("abc1234", 0.5), _outputs("abc1234"))
    with pytest.raises(UnknownBaseline, match=rf"'ffff000' was never audited on {tenant}/v1.*audited commits: abc1234"):
        store.promote(tenant, "v1", "ffff000", EXPLICIT)
    assert store.history(tenant) == []


def test_a_promotion_checks_the_baseline_it_was_compared_with(store, tenant):
    for commit in ("aaa1111", "bbb2222", "ccc3333"):
        store.archive(tenant, "v1", commit, _scores(commit, 0.5), _outputs(commit))
    store.promote(tenant, "v1", "aaa1111", FIRST_RUN, expected_current=None)
    store.promote(tenant, "v1", "bbb2222", passed_on("main"), expected_current="aaa1111")
    with pytest.raises(BaselineChanged, match="changed from aaa1111 to bbb2222"):
        store.promote(tenant, "v1", "ccc3333", passed_on("main"), expected_current="aaa1111")
    assert [p.commit for p in store.history(tenant, "v1")] == ["aaa1111", "bbb2222"]
    assert store.current(tenant, "v1").commit == "bbb2222"


def _read_then_promote(url: str, tenant: str, commit: str) -> str:
    """What a gate does: read the current baseline, compare (slowly), promote if it is still current."""
    store = DatabaseBaselineStore(DatabaseStore(open_results_database(url)))
    with store.locked(tenant):
        current = store.current(tenant, "v1")
        time.sleep(0.05)  # the comparison: long enough for an unserialized neighbour to slip in
        store.promote(tenant, "v1", commit, passed_on("main"), expected_current=current.commit if current else None)
    return commit


def test_promotions_from_concurrent_processes_are_serialized(store, tenant, upgraded_database):
    commits = [f"c{n}" for n in range(6)]
    for commit in commits:
        store.archive(tenant, "v1", commit, _scores(commit, 0.5), _outputs(commit))
    with ProcessPoolExecutor(max_workers=6, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_read_then_promote, [upgraded_database.app_url] * 6, [tenant] * 6, commits))
    assert sorted(done) == commits
    assert sorted(p.commit for p in store.history(tenant, "v1")) == commits  # none lost, none twice


def test_an_audit_whose_writer_died_before_its_scores_is_not_a_baseline(store, tenant):
    """Outputs stored, scores never: the audit is incomplete, not an audit that scored nothing."""
    store.store.write_audit_table(tenant, "v1", "abc1234", "r1", "candidate_outputs", _outputs("abc1234"))
    assert store.store.read_audit_table(tenant, "v1", "r1", "metric_scores") is None
    with pytest.raises(FileNotFoundError, match="lacks metric_scores"):
        store.mark_complete(tenant, "v1", "abc1234", "r1")
    empty = _scores("abc1234", 0.5).iloc[:0]
    store.store.write_audit_table(tenant, "v1", "abc1234", "r1", "metric_scores", empty)  # scored nothing, whole
    assert len(store.store.read_audit_table(tenant, "v1", "r1", "metric_scores")) == 0


def test_two_writers_of_one_audits_scores_take_turns(store, tenant):
    frames = [_scores("abc1234", score) for score in (0.25, 0.75)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(5):
            list(
                pool.map(
                    lambda frame: store.store.write_audit_table(tenant, "v1", "abc1234", "r1", "metric_scores", frame),
                    frames,
                )
            )
            written = store.store.read_audit_table(tenant, "v1", "r1", "metric_scores")
            assert written["score"].tolist() in ([0.25, 0.25], [0.75, 0.75])  # one writer's rows, never both


def test_a_nul_character_in_a_reason_is_stored_not_fatal(store, tenant):
    scores = _scores("abc1234", 0.5).assign(reason="candidate failed: bad byte \x00 here")
    store.store.write_audit_table(tenant, "v1", "abc1234", "r1", "metric_scores", scores)
    assert (
        store.store.read_audit_table(tenant, "v1", "r1", "metric_scores")["reason"][0]
        == "candidate failed: bad byte \ufffd here"
    )


def _database_id(url: str) -> int:
    from rag_eval_pipeline.resources.warehouse import WarehouseResource

    return id(WarehouseResource(root="unused", database_url=url).store().db)


def test_a_forked_worker_opens_its_own_connections_not_its_parents(upgraded_database):
    """A pool shared across fork() mixes two processes' queries on one socket: another tenant's answer."""
    parent = _database_id(upgraded_database.app_url)
    assert _database_id(upgraded_database.app_url) == parent  # one pool per process...
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_database_id, (upgraded_database.app_url,)) != parent  # ...and the child's own
