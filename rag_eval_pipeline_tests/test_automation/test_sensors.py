"""The sensors and the nightly schedule, evaluated as the daemon would on real folders and a real git repo."""

import json
import os
import subprocess
from datetime import datetime, timezone

import pandas as pd
import pytest
from dagster import build_schedule_context

from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.automation.schedules import SCHEDULES, build_nightly_resynthesis_schedule
from rag_eval_pipeline.automation.sensors import SENSORS, build_candidate_commit_sensor, build_new_documents_sensor
from rag_eval_pipeline.partitions import partition_key, register_partition, split_key
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import publish
from rag_eval_pipeline_tests.test_automation.conftest import copy_demo, make_definitions, tick
from rag_eval_pipeline_tests.test_automation.test_inbox import commit, make_repo

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


def test_exports():
    assert [s.name for s in SENSORS] == ["new_documents_sensor", "candidate_commit_sensor"]
    assert [s.job_name for s in SENSORS] == ["synthesis", "audit"]
    (nightly,) = SCHEDULES
    assert (nightly.cron_schedule, nightly.execution_timezone, nightly.job_name) == ("0 2 * * *", "UTC", "synthesis")


# --- new documents ---------------------------------------------------------------------------------


@pytest.fixture
def documents(roots, instance):
    sensor = build_new_documents_sensor(*roots, clock=lambda: NOW)
    return sensor, make_definitions(roots, sensors=[sensor])


def _adds(data):
    return {r.partitions_def_name: list(r.partition_keys) for r in data.dynamic_partitions_requests or []}


def test_new_tenant_then_new_version_then_nothing(documents, roots, instance):
    sensor, defs = documents
    copy_demo(roots[0] / "acme", "routewise-api-spec.md")
    (roots[0] / "Bad Name").mkdir()

    first = tick(sensor, instance, defs)
    assert _adds(first) == {"tenant": ["acme"]}
    assert first.run_requests == [] and "waiting for 1 file(s)" in first.skip_message
    assert "Bad Name" in first.skip_message  # invalid folders are named

    second = tick(sensor, instance, defs, first.cursor)
    (request,) = second.run_requests
    tenant, version = split_key(request.partition_key)
    assert tenant == "acme" and version.startswith("d20250304-050607-")
    assert _adds(second) == {"dataset_version": [version]}
    fingerprint = inbox.fingerprint(roots[0] / "acme", ["routewise-api-spec.md"])
    assert request.run_key == f"acme:{fingerprint}"
    assert request.tags["dagster/partition/tenant"] == "acme"  # the tag the run queue limits on
    assert inbox.read_fingerprints(roots[1], "acme") == {version: fingerprint}

    third = tick(sensor, instance, defs, second.cursor)
    assert third.run_requests == [] and not third.dynamic_partitions_requests
    assert f"acme: documents unchanged since {version}" in third.skip_message


def test_a_tenant_folder_that_is_a_link_is_skipped_with_its_reason(documents, roots, instance, tmp_path):
    sensor, defs = documents
    copy_demo(tmp_path / "elsewhere", "routewise-api-spec.md")
    (roots[0] / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    copy_demo(roots[0] / "acme", "data-retention-policy.md")

    first = tick(sensor, instance, defs)
    second = tick(sensor, instance, defs, first.cursor)

    assert _adds(first) == {"tenant": ["acme"]}  # never a tenant 'linked'
    assert [split_key(r.partition_key)[0] for r in second.run_requests] == ["acme"]
    assert "skipped 'linked': " in first.skip_message and "symbolic link" in first.skip_message
    assert "linked" not in json.loads(second.cursor)["tenants"]


def _settled(sensor, instance, defs):
    """Ticks until the first version is requested; returns the cursor."""
    cursor = tick(sensor, instance, defs).cursor
    data = tick(sensor, instance, defs, cursor)
    assert len(data.run_requests) == 1
    return data.cursor


def test_a_file_still_being_written_waits(documents, roots, instance):
    sensor, defs = documents
    copy_demo(roots[0] / "acme", "routewise-api-spec.md")
    cursor = _settled(sensor, instance, defs)
    growing = roots[0] / "acme" / "new.md"
    growing.write_text("# Half")
    data = tick(sensor, instance, defs, cursor)
    assert data.run_requests == [] and "new.md" in data.skip_message
    with growing.open("a") as handle:
        handle.write(" a document")  # the size changed since the last tick: still being written
    data = tick(sensor, instance, defs, data.cursor)
    assert data.run_requests == [] and "waiting" in data.skip_message
    data = tick(sensor, instance, defs, data.cursor)
    assert len(data.run_requests) == 1


def test_touch_without_content_change_makes_nothing(documents, roots, instance):
    sensor, defs = documents
    copy_demo(roots[0] / "acme", "routewise-api-spec.md")
    cursor = _settled(sensor, instance, defs)
    os.utime(roots[0] / "acme" / "routewise-api-spec.md", ns=(10**18, 10**18))
    for _ in range(3):
        data = tick(sensor, instance, defs, cursor)
        assert data.run_requests == [] and not data.dynamic_partitions_requests
        cursor = data.cursor


def test_cursor_survives_a_restart(roots, instance):
    copy_demo(roots[0] / "acme", "routewise-api-spec.md")
    before = build_new_documents_sensor(*roots, clock=lambda: NOW)
    cursor = _settled(before, instance, make_definitions(roots, sensors=[before]))
    assert json.loads(cursor)["tenants"]["acme"]["fingerprint"]
    # A new sensor object (a restarted daemon) given the stored cursor: nothing to do.
    after = build_new_documents_sensor(*roots, clock=lambda: NOW.replace(year=2030))
    defs = make_definitions(roots, sensors=[after])
    assert tick(after, instance, defs, cursor).run_requests == []
    (roots[0] / "acme" / "routewise-api-spec.md").write_text("changed")
    cursor = tick(after, instance, defs, cursor).cursor  # the change is seen, then settles
    (request,) = tick(after, instance, defs, cursor).run_requests
    assert split_key(request.partition_key)[1].startswith("d20300304-")


# --- candidate commits -----------------------------------------------------------------------------

GOLDEN = pd.DataFrame(
    [{"qa_id": "q1", "question": "Q?", "ground_truth": "A.", "gold_chunk_ids": ["c1"], "question_type": "simple"}]
)


@pytest.fixture
def golden(roots, instance):
    """acme has two published versions (v2 published last) and a registered tenant 'bare' with none."""
    for version in ("v1", "v2"):
        register_partition(instance, "acme", version)
        Warehouse(roots[1]).write("acme", version, "golden_set", GOLDEN)  # the table first, then its manifest
        publish(Warehouse(roots[1]), "acme", version, GOLDEN)
    register_partition(instance, "bare", "v1")
    manifest = roots[1] / "acme" / "v1" / "golden_set.manifest.json"
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, "published_at": "2000-01-01T00:00:00+00:00"}))
    return roots


def _candidates(tmp_path, roots, branch=None):
    sensor = build_candidate_commit_sensor(tmp_path / "candidates", roots[1], branch=branch or {})
    return sensor, make_definitions(roots, sensors=[sensor])


def _write(tmp_path, name, text):
    (tmp_path / "candidates").mkdir(exist_ok=True)
    (tmp_path / "candidates" / name).write_text(text)


def _op_config(request, op: str, *names: str) -> dict:
    """The named fields of an op's config; the run config also spells out every other field's default."""
    config = request.run_config["ops"][op]["config"]
    return {name: config[name] for name in names}


def test_good_manifest_runs_on_the_current_golden_version(tmp_path, golden, instance):
    sensor, defs = _candidates(tmp_path, golden)
    _write(tmp_path, "c.json", json.dumps({"tenant": "acme", "commit": "abc1234", "entry": "reference"}))
    data = tick(sensor, instance, defs)
    (request,) = data.run_requests
    assert request.partition_key == partition_key("acme", "v2")
    assert request.run_key == "acme:abc1234" and request.tags["rag_eval/commit"] == "abc1234"
    assert _op_config(request, "candidate_outputs", "candidate", "commit") == {
        "candidate": "reference",
        "commit": "abc1234",
    }
    assert _op_config(request, "regression_report", "branch") == {"branch": ""}  # no branch: never promoted
    assert tick(sensor, instance, defs, data.cursor).run_requests == []  # handled once


def test_a_manifest_branch_reaches_the_report(tmp_path, golden, instance):
    sensor, defs = _candidates(tmp_path, golden)
    _write(
        tmp_path, "c.json", json.dumps({"tenant": "acme", "commit": "abc1234", "entry": "reference", "branch": "main"})
    )
    (request,) = tick(sensor, instance, defs).run_requests
    assert _op_config(request, "regression_report", "branch") == {"branch": "main"}
    assert request.tags["rag_eval/branch"] == "main"
    _write(tmp_path, "c.json", json.dumps({"tenant": "acme", "commit": "abc1234", "entry": "reference", "branch": 3}))
    assert "invalid branch 3" in tick(sensor, instance, defs).skip_message


def test_bad_manifests_are_skipped_with_reasons(tmp_path, golden, instance):
    sensor, defs = _candidates(tmp_path, golden)
    _write(tmp_path, "broken.json", "{")
    _write(tmp_path, "ghost.json", json.dumps({"tenant": "ghost", "commit": "abc1234", "entry": "reference"}))
    _write(tmp_path, "bare.json", json.dumps({"tenant": "bare", "commit": "abc1234", "entry": "reference"}))
    data = tick(sensor, instance, defs)
    assert data.run_requests == []
    assert "broken.json: malformed JSON" in data.skip_message
    assert "ghost.json: unknown tenant 'ghost'" in data.skip_message
    assert "tenant 'bare' has no published golden set yet" in data.skip_message
    # A tenant waiting for its golden set is retried; a broken file is not reported again.
    again = tick(sensor, instance, defs, data.cursor)
    assert "bare" in again.skip_message and "broken.json" not in again.skip_message


def test_following_a_git_branch(tmp_path, golden, instance):
    repo = tmp_path / "repo"
    head = make_repo(repo)
    sensor, defs = _candidates(
        tmp_path, golden, {"repo": str(repo), "branch": "main", "tenant": "acme", "entry": "reference"}
    )
    first = tick(sensor, instance, defs)
    assert [r.tags["rag_eval/commit"] for r in first.run_requests] == [head]
    assert _op_config(first.run_requests[0], "regression_report", "branch") == {"branch": "main"}
    second_sha, third_sha = commit(repo, "2"), commit(repo, "3")
    second = tick(sensor, instance, defs, first.cursor)
    assert [r.run_key for r in second.run_requests] == [f"acme:{second_sha}", f"acme:{third_sha}"]
    assert json.loads(second.cursor)["git"]["last_seen"] == third_sha
    assert tick(sensor, instance, defs, second.cursor).run_requests == []


def test_a_missing_branch_is_a_reason_not_a_crash(tmp_path, golden, instance):
    make_repo(tmp_path / "repo")
    sensor, defs = _candidates(
        tmp_path, golden, {"repo": str(tmp_path / "repo"), "branch": "nope", "tenant": "acme", "entry": "reference"}
    )
    assert "branch 'nope' not found" in tick(sensor, instance, defs).skip_message


# --- the nightly schedule --------------------------------------------------------------------------


def _nightly(schedule, instance, defs):
    context = build_schedule_context(
        instance=instance, repository_def=defs.get_repository_def(), scheduled_execution_time=NOW
    )
    return schedule.evaluate_tick(context)


def test_nightly_schedule(roots, instance):
    schedule = build_nightly_resynthesis_schedule(*roots)
    defs = make_definitions(roots, schedules=[schedule])
    copy_demo(roots[0] / "acme", "routewise-api-spec.md")
    first = _nightly(schedule, instance, defs)
    (request,) = first.run_requests
    tenant, version = split_key(request.partition_key)
    assert tenant == "acme" and version.startswith("d20250304-050607-")
    assert instance.has_dynamic_partition("dataset_version", version)  # registered by the schedule
    assert f"documents unchanged since {version}" in _nightly(schedule, instance, defs).skip_message

    # The sensor shares the record: it makes no second version of what the schedule made.
    sensor = build_new_documents_sensor(*roots, clock=lambda: NOW)
    sensor_defs = make_definitions(roots, sensors=[sensor])
    assert tick(sensor, instance, sensor_defs, tick(sensor, instance, sensor_defs).cursor).run_requests == []

    copy_demo(roots[0] / "acme", "data-retention-policy.md")
    (changed,) = _nightly(schedule, instance, defs).run_requests
    assert split_key(changed.partition_key)[1] != version


def test_the_followed_branch_is_the_one_that_sets_baselines_whatever_its_name(tmp_path, golden, instance):
    """Following 'trunk': its commits, and manifests that say they are on it, may set and move the baseline;
    before, every audit compared its branch with "main", so a pass on trunk never moved anything."""
    repo = tmp_path / "repo"
    make_repo(repo)
    subprocess.run(["git", "-C", str(repo), "branch", "-m", "trunk"], check=True, capture_output=True)
    sensor, defs = _candidates(
        tmp_path, golden, {"repo": str(repo), "branch": "trunk", "tenant": "acme", "entry": "reference"}
    )
    _write(
        tmp_path, "c.json", json.dumps({"tenant": "acme", "commit": "abc1234", "entry": "reference", "branch": "trunk"})
    )
    requests = tick(sensor, instance, defs).run_requests
    assert len(requests) == 2
    for request in requests:
        assert _op_config(request, "regression_report", "branch", "main_branch") == {
            "branch": "trunk",
            "main_branch": "trunk",
        }
