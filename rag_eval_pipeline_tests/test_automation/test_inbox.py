"""The pure core: scanning, fingerprints, the stable-file rule, version names, manifests, git."""

import json
import os
import subprocess
from datetime import datetime, timezone

import pytest

from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.evaluation.candidates import CandidateSpec

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


def test_scan_skips_hidden_invalid_and_loose_files(tmp_path):
    (tmp_path / "acme" / "sub").mkdir(parents=True)
    (tmp_path / "acme" / "sub" / "a.md").write_text("hello")
    (tmp_path / "acme" / ".a.md.swp").write_text("partial")
    (tmp_path / "Bad Name").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    scan = inbox.scan_root(tmp_path)
    assert list(scan.tenants) == ["acme"]
    assert list(scan.tenants["acme"]) == ["sub/a.md"] and scan.tenants["acme"]["sub/a.md"][0] == 5
    assert "invalid tenant name 'Bad Name'" in scan.skipped["Bad Name"]
    assert scan.skipped[".git"] == "hidden" and scan.skipped["notes.txt"] == "not a folder"


def test_fingerprint_follows_content_and_paths_not_mtimes(tmp_path):
    (tmp_path / "a.md").write_text("one")
    before = inbox.fingerprint(tmp_path, ["a.md"])
    os.utime(tmp_path / "a.md", ns=(1, 1))
    assert inbox.fingerprint(tmp_path, ["a.md"]) == before
    (tmp_path / "a.md").write_text("two")
    assert inbox.fingerprint(tmp_path, ["a.md"]) != before
    (tmp_path / "b.md").write_text("one")
    assert inbox.fingerprint(tmp_path, ["b.md"]) != before  # same content, other path


def test_unstable_files():
    assert inbox.unstable_files(None, {"a": [1, 1]}) == ["a"]  # first sight: wait one tick
    assert inbox.unstable_files({"a": [1, 1]}, {"a": [1, 1]}) == []
    assert inbox.unstable_files({"a": [1, 1]}, {"a": [2, 1], "b": [1, 1]}) == ["a", "b"]


def test_version_names_are_valid_and_sort_by_time():
    first = inbox.version_name(NOW, "f" * 64)
    later = inbox.version_name(NOW.replace(year=2026), "0" * 64)
    assert first == "d20250304-050607-ffffffff" and validate_name("dataset version", first)
    assert sorted([later, first]) == [first, later]


def test_decide_tenant_waits_then_versions_then_rests(tmp_path):
    (tmp_path / "a.md").write_text("hello")
    listing = inbox.list_files(tmp_path)
    first = inbox.decide_tenant(tmp_path, listing, None, {}, NOW)
    assert first.action == "wait"
    second = inbox.decide_tenant(tmp_path, listing, first.state, {}, NOW)
    assert second.action == "new_version" and second.version.startswith("d20250304-050607-")
    third = inbox.decide_tenant(tmp_path, listing, second.state, {second.version: second.fingerprint}, NOW)
    assert third.action == "unchanged" and second.version in third.reason
    # Documents already recorded by the schedule: no second version of them.
    fresh = inbox.decide_tenant(tmp_path, listing, first.state, {"d1": second.fingerprint}, NOW)
    assert fresh.action == "unchanged" and "d1" in fresh.reason


def _manifest(folder, name, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(fields))
    return folder / name


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"commit": "abcdef1", "entry": "reference"}, "missing field(s) tenant"),
        ({"tenant": "ghost", "commit": "abcdef1", "entry": "reference"}, "unknown tenant 'ghost'"),
        ({"tenant": "acme", "commit": "not-a-sha", "entry": "reference"}, "invalid commit 'not-a-sha'"),
        ({"tenant": "acme", "commit": "abcdef1"}, "exactly one of 'entry' or 'outputs' (got neither)"),
        ({"tenant": "acme", "commit": "abcdef1", "entry": "reference", "outputs": "o.jsonl"}, "(got entry, outputs)"),
        ({"tenant": "acme", "commit": "abcdef1", "entry": "no colon"}, "invalid entry 'no colon'"),
        ({"tenant": "acme", "commit": "abcdef1", "outputs": "missing.jsonl"}, "does not exist"),
        ({"tenant": "acme", "commit": "abcdef1", "outputs": "answers.csv"}, "expected a path to a .jsonl file"),
        ({"entry": "reference"}, "missing field(s) tenant, commit"),
        ({"tenant": "acme", "commit": "abcdef1", "entry": 5}, "invalid entry 5: input should be a valid string"),
        ({"tenant": "Acme!", "commit": "xyz", "entry": "reference"}, "invalid tenant name 'Acme!'"),
        ({"tenant": "acme", "commit": "abcdef1", "entry": "reference.jsonl"}, "invalid entry 'reference.jsonl'"),
    ],
)
def test_manifest_errors_name_file_and_reason(tmp_path, fields, message):
    path = _manifest(tmp_path, "m.json", **fields)
    with pytest.raises(inbox.ManifestError) as error:
        inbox.parse_manifest(path, {"acme"})
    assert str(error.value).startswith("m.json: ") and message in str(error.value)
    assert "\n" not in str(error.value)  # one line, as the sensor's skip reason shows it


def test_malformed_json_and_good_manifests(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EVAL_CANDIDATE_MODULES", "pkg")  # manifests may name code only in allowed packages
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(inbox.ManifestError, match="bad.json: malformed JSON"):
        inbox.parse_manifest(tmp_path / "bad.json", {"acme"})
    (tmp_path / "out.jsonl").write_text("")
    good = inbox.parse_manifest(
        _manifest(tmp_path, "o.json", tenant="acme", commit="abcdef1", outputs="out.jsonl"), {"acme"}
    )
    assert good.candidate == CandidateSpec("outputs_file", str((tmp_path / "out.jsonl").resolve()))
    assert good.run_key == "acme:abcdef1"
    entry = inbox.parse_manifest(
        _manifest(tmp_path, "e.json", tenant="acme", commit="abcdef1", entry="pkg.mod:fn"), {"acme"}
    )
    assert entry.candidate == CandidateSpec("entry_point", "pkg.mod:fn")


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def make_repo(path):
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return commit(path, "first")


def commit(repo, message):
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_new_commits_after_the_cursor(tmp_path):
    repo = tmp_path / "repo"
    first = make_repo(repo)
    assert inbox.new_commits(repo, "main", None) == [first]
    second, third = commit(repo, "2"), commit(repo, "3")
    assert inbox.new_commits(repo, "main", first) == [second, third]
    assert inbox.new_commits(repo, "main", third) == []


def test_git_errors_are_clear(tmp_path):
    with pytest.raises(inbox.GitError, match="does not exist"):
        inbox.new_commits(tmp_path / "nowhere", "main", None)
    (tmp_path / "plain").mkdir()
    with pytest.raises(inbox.GitError, match="is not a git repository"):
        inbox.new_commits(tmp_path / "plain", "main", None)
    make_repo(tmp_path / "repo")
    with pytest.raises(inbox.GitError, match="branch 'release' not found"):
        inbox.new_commits(tmp_path / "repo", "release", None)


def test_a_manifest_reads_outputs_only_beside_it(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (tmp_path / "elsewhere.jsonl").write_text("")
    (manifests / "link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    for outputs in ("../elsewhere.jsonl", str(tmp_path / "elsewhere.jsonl"), "link.jsonl"):
        path = _manifest(manifests, "m.json", tenant="acme", commit="abcdef1", outputs=outputs)
        with pytest.raises(inbox.ManifestError, match="outside the manifests folder"):
            inbox.parse_manifest(path, {"acme"})


def test_a_manifest_or_its_outputs_file_that_is_a_link_is_refused(tmp_path):
    """A hard link is a second name for a file anywhere on the file system (another team's outputs, a
    host file): refused like a symbolic link, whatever the file holds."""
    manifests, elsewhere = tmp_path / "manifests", tmp_path / "elsewhere"
    manifests.mkdir()
    outputs = json.dumps({"qa_id": "q1", "answer": "Their answer.", "contexts": []}) + "\n"
    theirs = _manifest(elsewhere, "theirs.json", tenant="acme", commit="abcdef1", entry="reference")
    (elsewhere / "theirs.jsonl").write_text(outputs)

    os.link(theirs, manifests / "hard.json")
    (manifests / "soft.json").symlink_to(theirs)
    for name, kind in (("hard.json", "hard link"), ("soft.json", "symbolic link")):
        with pytest.raises(inbox.ManifestError, match=rf"^{name}: .*{kind}"):
            inbox.parse_manifest(manifests / name, {"acme"})
    assert set(inbox.manifest_files(manifests)) == {"hard.json", "soft.json"}  # listed, so reported once

    os.link(elsewhere / "theirs.jsonl", manifests / "linked.jsonl")
    path = _manifest(manifests, "m.json", tenant="acme", commit="abcdef1", outputs="linked.jsonl")
    with pytest.raises(inbox.ManifestError, match=r"^m.json: outputs 'linked.jsonl' is a hard link"):
        inbox.parse_manifest(path, {"acme"})

    (manifests / "own.jsonl").write_text(outputs)  # the same records in a file of its own: accepted
    own = inbox.parse_manifest(
        _manifest(manifests, "m.json", tenant="acme", commit="abcdef1", outputs="own.jsonl"), {"acme"}
    )
    assert own.candidate == CandidateSpec("outputs_file", str((manifests / "own.jsonl").resolve()))
