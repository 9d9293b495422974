"""What the sensors and the schedule look at, without Dagster: tenant folders, candidate manifests, a git branch.

Everything here is plain functions over folders and JSON-able state, so the Dagster layer
(sensors.py, schedules.py) only turns decisions into RunRequests and cursors.

Dataset versions made from new documents are named `dYYYYMMDD-HHMMSS-<fingerprint[:8]>` (UTC):
names sort by time, and the suffix says which document state a version was made from, so two
versions made in the same second from different documents never collide.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, StrictStr, ValidationError, ValidationInfo, field_validator, model_validator

from rag_eval_pipeline.core.files import atomic_write_text
from rag_eval_pipeline.core.names import PartitionNameError, validate_name
from rag_eval_pipeline.evaluation.candidates import CandidateError, CandidateSpec
from rag_eval_pipeline.ingest.parsing import UnreadableDocument, list_folder, read_inside, tenant_folder_problem

FINGERPRINT_FILE = "documents_fingerprint.json"

# A listing is {relative path: [size, mtime_ns]}: lists, not tuples, so it round-trips through JSON.
Listing = dict[str, list[int]]


# --- tenant folders -----------------------------------------------------------------------------


@dataclass
class RootScan:
    tenants: dict[str, Listing] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # folder name -> why it is not a tenant


def scan_root(root: Path) -> RootScan:
    """Every tenant folder under root with its files' sizes and mtimes; other entries with a reason.

    root may be a link (an operator's mount); a tenant folder may not (tenant_folder_problem).
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"documents root {root} does not exist")
    scan = RootScan()
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            scan.skipped[entry.name] = "hidden"
        elif problem := tenant_folder_problem(entry):
            scan.skipped[entry.name] = problem
        elif not entry.is_dir():
            scan.skipped[entry.name] = "not a folder"
        else:
            try:
                validate_name("tenant", entry.name)
            except PartitionNameError as error:
                scan.skipped[entry.name] = str(error)
                continue
            scan.tenants[entry.name] = list_files(entry)
    return scan


def list_files(folder: Path) -> Listing:
    """Size and mtime of the files read_documents would read: hidden files and links are left out."""
    listing: Listing = {}
    if not Path(folder).is_dir():
        return listing  # removed since the root was scanned: nothing to read
    for relative, path in list_folder(folder).files:
        stat = path.stat(follow_symlinks=False)
        listing[relative] = [stat.st_size, stat.st_mtime_ns]
    return listing


def unstable_files(previous: Listing | None, current: Listing) -> list[str]:
    """Files that may still be being written: new since, or changed in size or mtime since, the last look.

    A file must be seen twice with the same size and mtime before it is read, so a copy in progress
    is never synthesized from half a document.
    """
    previous = previous or {}
    return sorted(path for path, stat in current.items() if previous.get(path) != list(stat))


def fingerprint(folder: Path, paths) -> str:
    """sha256 over the sorted (relative path, sha256 of content): changes with content, not with mtimes."""
    digest, root = hashlib.sha256(), Path(folder).resolve()
    for relative in sorted(paths):
        digest.update(json.dumps([relative, _content_digest(root, relative)]).encode("utf-8") + b"\n")
    return digest.hexdigest()


def _content_digest(root: Path, relative: str) -> str:
    try:
        return hashlib.sha256(read_inside(root, relative)).hexdigest()
    except UnreadableDocument as error:  # ingestion rejects the file with this reason; the tick goes on
        return f"unreadable: {error}"


def listing_digest(listing: Listing) -> str:
    """A short key for a listing, so an untouched folder is not re-hashed on every tick."""
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest()


def version_name(now: datetime, document_fingerprint: str) -> str:
    stamp = now.astimezone(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return validate_name("dataset version", f"d{stamp}-{document_fingerprint[:8]}")


# --- tenant decisions (the sensor's cursor state is a plain dict per tenant) ---------------------


@dataclass(frozen=True)
class TenantDecision:
    action: str  # "new_version", "wait", "unchanged", "empty"
    state: dict  # the tenant's cursor state after this tick
    version: str | None = None
    fingerprint: str | None = None
    reason: str = ""


def decide_tenant(
    folder: Path, listing: Listing, state: dict | None, recorded: dict[str, str], now: datetime
) -> TenantDecision:
    """What to do about one tenant folder, given what the last tick saw and the recorded fingerprints.

    state: {"listing", "hashed_listing", "fingerprint", "version"} from the last tick (None: never seen).
    recorded: version -> fingerprint from the warehouse, shared with the nightly schedule, so the two
    never make two versions of the same documents.
    """
    state = dict(state or {})
    previous_listing = state.get("listing")
    state["listing"] = listing
    if not listing:
        return TenantDecision("empty", state, reason="no documents yet")
    waiting = unstable_files(previous_listing, listing)
    if waiting:
        return TenantDecision(
            "wait", state, reason=f"waiting for {len(waiting)} file(s) to settle: {', '.join(waiting[:5])}"
        )
    digest = listing_digest(listing)
    if state.get("hashed_listing") == digest:
        return TenantDecision("unchanged", state, reason=f"documents unchanged since {state.get('version')}")
    current = fingerprint(folder, listing)
    state["hashed_listing"] = digest
    latest = latest_recorded(recorded)
    if latest and recorded[latest] == current or state.get("fingerprint") == current:
        state["fingerprint"], state["version"] = current, latest or state.get("version")
        return TenantDecision("unchanged", state, reason=f"documents unchanged since {state['version']}")
    earlier = [version for version, fp in recorded.items() if fp == current]
    if earlier:
        # Documents reverted to an earlier state: that version already holds its golden set.
        state["fingerprint"], state["version"] = current, max(earlier)
        return TenantDecision("unchanged", state, reason=f"documents match the earlier version {max(earlier)}")
    version = version_name(now, current)
    state["fingerprint"], state["version"] = current, version
    return TenantDecision("new_version", state, version=version, fingerprint=current)


# --- the fingerprint record in the warehouse ------------------------------------------------------


def fingerprint_record_path(warehouse_root: Path, tenant: str) -> Path:
    return Path(warehouse_root) / validate_name("tenant", tenant) / FINGERPRINT_FILE


def read_fingerprints(warehouse_root: Path, tenant: str) -> dict[str, str]:
    """version -> document fingerprint, for every version the sensor or the schedule made."""
    path = fingerprint_record_path(warehouse_root, tenant)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def record_fingerprint(warehouse_root: Path, tenant: str, version: str, document_fingerprint: str) -> None:
    path = fingerprint_record_path(warehouse_root, tenant)
    record = read_fingerprints(warehouse_root, tenant)
    record[validate_name("dataset version", version)] = document_fingerprint
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True) + "\n")  # never a half-written record


def latest_recorded(recorded: dict[str, str]) -> str | None:
    """Version names sort by time (see version_name), so the greatest is the latest."""
    return max(recorded) if recorded else None


# --- candidate manifests --------------------------------------------------------------------------

_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")


class ManifestError(ValueError):
    """A candidate manifest that cannot be used, with the reason."""


@dataclass(frozen=True)
class CandidateCommit:
    tenant: str
    commit: str
    candidate: CandidateSpec
    source: str  # the manifest file or the git branch it came from
    branch: str = ""  # a pass on the main branch makes the candidate the tenant's baseline

    @property
    def run_key(self) -> str:
        return f"{self.tenant}:{self.commit}"


class CandidateManifest(BaseModel):
    """A manifest's fields; other keys are ignored. Validated with the known tenants as context."""

    tenant: StrictStr
    commit: StrictStr
    entry: StrictStr | None = None  # 'reference' or 'package.module:function'
    outputs: StrictStr | None = None  # a .jsonl file beside the manifest
    branch: StrictStr = ""

    @field_validator("tenant")
    @classmethod
    def _known_tenant(cls, tenant: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("known_tenants", set())
        if validate_name("tenant", tenant) not in known:
            raise ValueError(f"unknown tenant {tenant!r} (known: {', '.join(sorted(known)) or 'none'})")
        return tenant

    @field_validator("commit")
    @classmethod
    def _sha(cls, commit: str) -> str:
        if not _COMMIT.fullmatch(commit):
            raise ValueError(f"invalid commit {commit!r}: expected 7 to 64 lowercase hexadecimal digits")
        return commit

    @model_validator(mode="after")
    def _one_source(self) -> CandidateManifest:
        given = [name for name in ("entry", "outputs") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'entry' or 'outputs' (got {', '.join(given) or 'neither'})")
        return self

    def spec(self, folder: Path) -> CandidateSpec:
        """The candidate it names. Anyone who can drop a file in the folder can name an entry, and the
        audit run imports it: code only in the packages RAG_EVAL_CANDIDATE_MODULES allows."""
        if self.entry is not None:
            return CandidateSpec.entry(self.entry).require_allowed()
        return CandidateSpec.outputs_beside(folder, str(self.outputs))  # one of the two is set (_one_source)


def parse_manifest(path: Path, known_tenants: set[str]) -> CandidateCommit:
    """One manifest: {"tenant", "commit", exactly one of "entry" or "outputs", optional "branch"}; ManifestError otherwise.

    Read as documents are (read_inside): a symbolic or hard link, a second name for a file elsewhere, is refused.
    """
    path = Path(path)
    try:
        fields = json.loads(read_inside(path.parent, path.name).decode("utf-8"))
    except UnreadableDocument as error:
        raise ManifestError(f"{path.name}: {error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ManifestError(f"{path.name}: malformed JSON ({error})") from None
    if not isinstance(fields, dict):
        raise ManifestError(f"{path.name}: expected a JSON object, got {type(fields).__name__}")
    try:
        manifest = CandidateManifest.model_validate(fields, context={"known_tenants": known_tenants})
        spec = manifest.spec(path.parent)
    except ValidationError as error:
        raise ManifestError(f"{path.name}: {_problems(error)}") from None
    except CandidateError as error:
        raise ManifestError(f"{path.name}: {error}") from None
    return CandidateCommit(manifest.tenant, manifest.commit, spec, path.name, manifest.branch)


def _problems(error: ValidationError) -> str:
    """Every problem on one line, in the manifest's terms: our validators' own messages as they are."""
    missing = [str(problem["loc"][0]) for problem in error.errors() if problem["type"] == "missing"]
    said = [f"missing field(s) {', '.join(missing)}"] if missing else []
    for problem in error.errors():
        if problem["type"] == "missing":
            continue
        context = problem.get("ctx", {})
        if "error" in context:
            said.append(str(context["error"]))
        else:
            said.append(
                f"invalid {problem['loc'][0]} {problem['input']!r}: {problem['msg'][0].lower()}{problem['msg'][1:]}"
            )
    return "; ".join(said)


def manifest_files(folder: Path) -> dict[str, str]:
    """name -> sha256 of content of every manifest, so a file is handled again only when it changes.

    A manifest that cannot be read (a link, a pipe) is listed with its reason, so parse_manifest reports it once.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {
        path.name: _content_digest(folder, path.name)
        for path in sorted(folder.glob("*.json"))
        if not path.name.startswith(".")
    }


# --- following a git branch ----------------------------------------------------------------------


class GitError(RuntimeError):
    """The candidate repository or branch cannot be read."""


def _git(repo: Path, *args: str) -> str:
    try:
        completed = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60, check=False
        )
    except FileNotFoundError:
        raise GitError("the git executable is not installed") from None
    if completed.returncode != 0:
        raise GitError(completed.stderr.strip() or f"git {' '.join(args)} failed")
    return completed.stdout


def new_commits(repo: Path, branch: str, last_seen: str | None) -> list[str]:
    """Commits on branch after last_seen, oldest first; with no last_seen, only the branch's head."""
    repo = Path(repo)
    if not repo.is_dir():
        raise GitError(f"candidate repository {repo} does not exist")
    try:
        _git(repo, "rev-parse", "--git-dir")
    except GitError:
        raise GitError(f"{repo} is not a git repository") from None
    try:
        head = _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}").strip()
    except GitError:
        raise GitError(f"branch {branch!r} not found in {repo}") from None
    if last_seen is None:
        return [head]
    try:
        listed = _git(repo, "rev-list", "--reverse", f"{last_seen}..{head}")
    except GitError as error:
        raise GitError(f"cannot list commits after {last_seen[:12]} on {branch!r} in {repo}: {error}") from None
    return listed.split()
