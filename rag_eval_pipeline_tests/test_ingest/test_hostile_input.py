"""Hostile tenant folders: links out of the folder, special files, binary and oversized text.

Every entry is either read as a document or rejected with its reason, and nothing outside the
tenant's folder is ever read. test_parsing.py covers the ordinary bad files (encrypted, corrupt,
empty, not UTF-8, unsupported) and our awkward edge-case PDFs one by one.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from dagster import instance_for_test, materialize

from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.definitions import ALL_ASSETS, local_resources
from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
from rag_eval_pipeline.ingest.parsing import UnreadableDocument, list_folder, read_documents, read_inside
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.resources.documents import DocumentsResource
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.pipeline import from_folder

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "data" / "tenants" / "demo"
SECRET = "The launch code of the other tenant is 4417."


@pytest.fixture
def root(tmp_path) -> Path:
    """A documents root with tenants acme and globex, and a secret file outside both."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    documents = tmp_path / "documents"
    for tenant in ("acme", "globex"):
        (documents / tenant).mkdir(parents=True)
    shutil.copy(DEMO / "data-retention-policy.md", documents / "acme" / "policy.md")
    (documents / "globex" / "secret.md").write_text(f"# Globex\n\n{SECRET}\n", encoding="utf-8")
    return documents


def _reasons(result) -> dict[str, str]:
    return {r.path: r.reason for r in result.rejections}


def _all_text(result) -> str:
    return "\n".join(d.text for d in result.documents)


# --- links: never followed, so nothing outside the folder is read -----------------------------


def test_a_link_to_a_file_outside_the_folder_is_rejected(root):
    acme = root / "acme"
    (acme / "absolute.md").symlink_to(root.parent / "outside" / "secret.md")
    (acme / "relative.md").symlink_to(Path("..") / ".." / "outside" / "secret.md")

    result = read_documents(acme)

    _assert_only_policy_read_and_links_out_rejected(result, ["absolute.md", "relative.md"])


def _assert_only_policy_read_and_links_out_rejected(result, links: list[str]) -> None:
    assert [d.path for d in result.documents] == ["policy.md"]
    reasons = _reasons(result)
    assert sorted(reasons) == links
    assert all("outside the document folder" in reason for reason in reasons.values()), reasons
    assert SECRET not in _all_text(result)


def test_a_dot_dot_link_into_another_tenants_folder_is_rejected(root):
    (root / "acme" / "borrowed.md").symlink_to(Path("..") / "globex" / "secret.md")

    result = read_documents(root / "acme")

    assert "outside the document folder" in _reasons(result)["borrowed.md"]
    assert SECRET not in _all_text(result)


def test_a_linked_folder_pointing_out_is_rejected_and_not_entered(root):
    (root / "acme" / "shared").symlink_to(root.parent / "outside", target_is_directory=True)
    (root / "acme" / "sub").mkdir()
    (root / "acme" / "sub" / "up").symlink_to(Path("..") / ".." / "globex", target_is_directory=True)

    result = read_documents(root / "acme")

    _assert_only_policy_read_and_links_out_rejected(result, ["shared", "sub/up"])


def test_links_inside_the_folder_are_rejected_and_their_targets_read_once(root):
    acme = root / "acme"
    (acme / "alias.md").symlink_to("policy.md")
    (acme / "loop").symlink_to(".", target_is_directory=True)  # would recurse forever if followed

    result = read_documents(acme)

    assert [d.path for d in result.documents] == ["policy.md"]
    reasons = _reasons(result)
    assert "symbolic link to policy.md" in reasons["alias.md"] and "not followed" in reasons["alias.md"]
    assert "not followed" in reasons["loop"]


def test_a_broken_link_is_rejected_not_skipped(root):
    (root / "acme" / "gone.md").symlink_to("nowhere.md")

    result = read_documents(root / "acme")

    assert "broken symbolic link" in _reasons(result)["gone.md"]


def test_a_folder_given_by_path_may_itself_be_a_link_and_be_named_with_dot_dot(root, tmp_path):
    # A folder named by path (`rag-eval synthesize --docs`, a mount) is trusted; its content is not.
    # A tenant's folder found under the documents root may not be a link (test below).
    (tmp_path / "mounted").symlink_to(root / "acme", target_is_directory=True)
    (root / "acme" / "escape.md").symlink_to(root / "globex" / "secret.md")

    for folder in (tmp_path / "mounted", root / "globex" / ".." / "acme"):
        result = read_documents(folder)
        assert [d.path for d in result.documents] == ["policy.md"]
        assert list(_reasons(result)) == ["escape.md"]


def test_a_tenant_folder_that_is_a_link_is_refused_where_tenants_are_found(root):
    # root/borrowed -> globex: a "tenant" whose golden set would be made of another tenant's documents.
    (root / "borrowed").symlink_to(root / "globex", target_is_directory=True)

    with pytest.raises(ValueError, match=r"tenant folder .*borrowed is a symbolic link"):
        DocumentsResource(root=str(root)).folder_for("borrowed")
    scan = inbox.scan_root(root)
    assert sorted(scan.tenants) == ["acme", "globex"]
    assert "symbolic link" in scan.skipped["borrowed"]


def test_the_documents_root_itself_may_be_a_link(root, tmp_path):
    (tmp_path / "mounted").symlink_to(root, target_is_directory=True)  # the operator's mount of the whole root

    folder = DocumentsResource(root=str(tmp_path / "mounted")).folder_for("acme")

    assert [d.path for d in read_documents(folder).documents] == ["policy.md"]
    assert sorted(inbox.scan_root(tmp_path / "mounted").tenants) == ["acme", "globex"]


# --- hard links: a second name for a file anywhere on the same file system ----------------------


def test_a_hard_link_to_another_tenants_file_or_a_host_file_is_rejected(root):
    acme = root / "acme"
    os.link(root / "globex" / "secret.md", acme / "borrowed.md")
    os.link(root.parent / "outside" / "secret.md", acme / "host.md")

    result = read_documents(acme)

    assert [d.path for d in result.documents] == ["policy.md"]
    reasons = _reasons(result)
    assert sorted(reasons) == ["borrowed.md", "host.md"]
    assert all("hard link" in reason for reason in reasons.values()), reasons
    assert SECRET not in _all_text(result)


def test_a_file_swapped_for_a_hard_link_after_the_listing_is_not_read(root):
    acme = root / "acme"
    listing = list_folder(acme)
    assert [relative for relative, _ in listing.files] == ["policy.md"]
    (acme / "policy.md").unlink()
    os.link(root / "globex" / "secret.md", acme / "policy.md")  # same name, now another tenant's file

    with pytest.raises(UnreadableDocument, match="hard link"):
        read_inside(listing.root, "policy.md")


def test_a_fifo_is_rejected_without_blocking(root):
    os.mkfifo(root / "acme" / "pipe.md")  # reading it would wait forever for a writer

    result = read_documents(root / "acme")

    assert "not a regular file" in _reasons(result)["pipe.md"]


def test_an_unreadable_file_is_rejected_and_the_run_goes_on(tmp_path):
    """As root every file is readable, so the folder is read by an unprivileged user (nobody) in a child
    process; as any other user, in this one. Either way a file without read permission is rejected."""
    folder = Path(tempfile.mkdtemp(prefix="unreadable-"))  # outside pytest's 0700 folders: nobody may enter
    try:
        folder.chmod(0o755)
        shutil.copy(DEMO / "data-retention-policy.md", folder / "policy.md")
        (folder / "policy.md").chmod(0o644)
        locked = folder / "locked.md"
        locked.write_text("# Locked\n\nText.", encoding="utf-8")
        locked.chmod(0)

        documents, reasons = _read_as_unprivileged(folder)

        assert documents == ["policy.md"]
        assert "cannot read" in reasons["locked.md"]
    finally:
        shutil.rmtree(folder)


def _read_as_unprivileged(folder: Path) -> tuple[list[str], dict[str, str]]:
    """read_documents(folder) as a user the file modes apply to: (document paths, rejection reasons)."""
    if os.geteuid() != 0:
        result = read_documents(folder)
        return [d.path for d in result.documents], _reasons(result)
    nobody = pwd.getpwnam("nobody")
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child drops root for good, reads, reports, and ends without running pytest's exit code
        try:
            os.close(reader)
            read_documents(folder)  # as root first: whatever it imports lazily is loaded (nobody cannot read /root)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            result = read_documents(folder)
            payload = json.dumps([[d.path for d in result.documents], _reasons(result)])
        except BaseException as error:  # said to the parent, whose assertion shows it
            payload = json.dumps({"error": f"{type(error).__name__}: {error}"})
        try:
            os.write(writer, payload.encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        payload = pipe.read()
    os.waitpid(child, 0)
    answer = json.loads(payload)
    assert isinstance(answer, list), f"the unprivileged reader failed: {answer}"
    documents, reasons = answer
    return documents, reasons


# --- undecodable and oversized content ----------------------------------------------------------


def test_text_with_nul_bytes_is_rejected_as_binary(root):
    # UTF-16 without a byte-order mark is valid UTF-8 byte for byte, but it is not text.
    (root / "acme" / "utf16.txt").write_bytes("Receipts are kept for ten years.".encode("utf-16-le"))

    result = read_documents(root / "acme")

    assert "binary" in _reasons(result)["utf16.txt"]


def test_a_two_megabyte_single_word_chunks_into_bounded_chunks_quickly(root):
    (root / "acme" / "word.txt").write_text("a" * 2_000_000, encoding="utf-8")
    config = ChunkingSettings(max_tokens=180, overlap_tokens=0)

    started = time.perf_counter()
    document = {d.path: d for d in read_documents(root / "acme").documents}["word.txt"]
    chunks = chunk_document(document, config)
    elapsed = time.perf_counter() - started

    assert elapsed < 20, elapsed
    assert len(chunks) > 1
    # Bounded in characters, not only in tokens: one 2 MB "token" must not make a 2 MB chunk.
    assert max(len(c.text) for c in chunks) <= 20_000
    assert all(c.n_tokens <= config.max_tokens for c in chunks)
    assert sum(c.text.count("a") for c in chunks) == 2_000_000  # nothing lost


# --- every place that lists a tenant's documents ------------------------------------------------


@pytest.fixture
def hostile_tenant(root, awkward_corpus) -> Path:
    """acme with links out, a hard link to globex's file, our edge-case PDFs (encrypted, two columns, right to
    left, code, an image-only page, an outline), a zero-byte PDF, binary text and a huge word."""
    acme = root / "acme"
    (acme / "leak.md").symlink_to(root.parent / "outside" / "secret.md")
    (acme / "neighbour").symlink_to(root / "globex", target_is_directory=True)
    os.link(root / "globex" / "secret.md", acme / "hardlinked.md")
    (acme / "edge").mkdir()
    for pdf in sorted(awkward_corpus.edge.glob("*.pdf")):
        shutil.copy(pdf, acme / "edge" / pdf.name)
    (acme / "zero.pdf").write_bytes(b"")
    (acme / "utf16.txt").write_bytes("Receipts.".encode("utf-16-le"))
    (acme / "word.txt").write_text("a" * 2_000_000, encoding="utf-8")
    return acme


EXPECTED_REJECTIONS = {
    "leak.md": "outside the document folder",
    "neighbour": "outside the document folder",
    "hardlinked.md": "hard link",
    "edge/locked.pdf": "encrypted",
    "zero.pdf": "empty",
    "utf16.txt": "binary",
}


@pytest.mark.dagster
def test_ingest_assets_record_each_hostile_file_and_go_on(root, hostile_tenant, tmp_path):
    warehouse_root = tmp_path / "warehouse"
    with instance_for_test() as instance:
        key = register_partition(instance, "acme", "v1")
        result = materialize(
            ALL_ASSETS,
            selection=["raw_documents", "rejected_documents", "document_chunks"],
            partition_key=key,
            instance=instance,
            resources=local_resources(root, warehouse_root),
        )
    assert result.success

    warehouse = Warehouse(warehouse_root)
    rejected = dict(zip(*warehouse.read("acme", "v1", "rejected_documents")[["path", "reason"]].T.values))
    assert sorted(rejected) == sorted(EXPECTED_REJECTIONS)
    for path, keyword in EXPECTED_REJECTIONS.items():
        assert keyword in rejected[path], (path, rejected[path])
    documents = warehouse.read("acme", "v1", "raw_documents")
    readable_pdfs = [
        f"edge/{name}"
        for name in (
            "code-and-formula.pdf",
            "figure-page.pdf",
            "outline.pdf",
            "owner-password-only.pdf",
            "right-to-left.pdf",
            "two-columns.pdf",
        )
    ]
    assert sorted(documents["path"]) == sorted(["policy.md", "word.txt", *readable_pdfs])
    chunks = warehouse.read("acme", "v1", "document_chunks")
    assert set(chunks["doc_id"]) == set(documents["doc_id"])
    assert chunks["text"].str.len().max() <= 20_000
    assert not chunks["text"].str.contains("4417").any()


def test_the_new_documents_listing_never_reads_outside_the_folder(root, hostile_tenant):
    listing = inbox.list_files(hostile_tenant)
    before = inbox.fingerprint(hostile_tenant, listing)
    (root.parent / "outside" / "secret.md").write_text("# Changed\n\nNew secret.\n", encoding="utf-8")
    (root / "globex" / "secret.md").write_text("# Changed\n\nNew secret.\n", encoding="utf-8")

    assert "leak.md" not in listing and not any(p.startswith("neighbour") for p in listing)
    assert "hardlinked.md" not in listing
    assert "word.txt" in listing and "edge/right-to-left.pdf" in listing and "edge/locked.pdf" in listing
    assert inbox.fingerprint(hostile_tenant, inbox.list_files(hostile_tenant)) == before
    assert inbox.scan_root(root).tenants["acme"] == listing


def test_synthesize_from_a_folder_of_links_out_names_the_reason(root, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leak.md").symlink_to(root.parent / "outside" / "secret.md")

    with pytest.raises(ValueError, match=r"no readable document .*leak\.md: .*outside the document folder"):
        from_folder(docs, make_generator=None, judge=None, embedder=None, n_items=1)
