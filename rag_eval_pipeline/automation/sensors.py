"""Sensors: new documents start a synthesis run, new candidate commits start an audit run.

Decisions live in inbox.py; this module turns them into Dagster requests and cursors.
The cursors are JSON, stored by Dagster, so a restarted daemon carries on where it stopped.
"""

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from dagster import (
    AddDynamicPartitionsRequest,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from rag_eval_pipeline import settings
from rag_eval_pipeline.automation import inbox
from rag_eval_pipeline.automation.jobs import audit_job, synthesis_job
from rag_eval_pipeline.automation.queues import run_tags
from rag_eval_pipeline.automation.run_config import lineage_run_config
from rag_eval_pipeline.core.names import COMMIT_TAG
from rag_eval_pipeline.evaluation.candidates import CandidateError, CandidateSpec
from rag_eval_pipeline.evaluation.submissions import submitted
from rag_eval_pipeline.partitions import DATASET_VERSIONS, TENANTS, partition_key
from rag_eval_pipeline.reporting.assets import ReportConfig
from rag_eval_pipeline.resources.warehouse import WarehouseResource
from rag_eval_pipeline.synthesis.versions import latest_version

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _load_cursor(cursor: str | None) -> dict:
    return json.loads(cursor) if cursor else {}


def _dump_cursor(state: dict) -> str:
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


def _result(context, run_requests, partitions_requests, reasons, cursor) -> SensorResult:
    """Requests if any; otherwise a skip reason that says what was seen (SensorResult forbids both)."""
    for reason in reasons:
        context.log.info(reason)
    skip = None if run_requests else SkipReason("; ".join(reasons) or "nothing new")
    return SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=partitions_requests or None,
        skip_reason=skip,
        cursor=cursor,
    )


# --- new documents ---------------------------------------------------------------------------------


def build_new_documents_sensor(
    documents_root: Path | None = None,
    warehouse_root: Path | None = None,
    clock: Clock = _utcnow,
    name: str = "new_documents_sensor",
):
    """A sensor over a documents root (default: settings, read at each tick so the env can move it)."""

    @sensor(
        name=name,
        job=synthesis_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description="New tenant folders and new or changed documents make a new dataset version and synthesize it.",
    )
    def _new_documents(context: SensorEvaluationContext):
        current = settings.load()
        root, warehouse = Path(documents_root or current.documents_root), Path(warehouse_root or current.warehouse_root)
        if not root.is_dir():
            return SkipReason(f"documents root {root} does not exist (set RAG_EVAL_DOCUMENTS_ROOT)")
        scan = inbox.scan_root(root)
        cursor = _load_cursor(context.cursor)
        tenants_state = cursor.get("tenants", {})
        reasons = [f"skipped {name!r}: {why}" for name, why in scan.skipped.items() if why != "hidden"]
        new_tenants, new_versions, run_requests = [], [], []
        for tenant, listing in scan.tenants.items():
            if tenant not in tenants_state and not context.instance.has_dynamic_partition(TENANTS, tenant):
                new_tenants.append(tenant)
            decision = inbox.decide_tenant(
                root / tenant, listing, tenants_state.get(tenant), inbox.read_fingerprints(warehouse, tenant), clock()
            )
            tenants_state[tenant] = decision.state
            if decision.action != "new_version" or decision.version is None or decision.fingerprint is None:
                reasons.append(f"{tenant}: {decision.reason}")
                continue
            # Recorded now, so the nightly schedule sees this version's documents as already handled.
            inbox.record_fingerprint(warehouse, tenant, decision.version, decision.fingerprint)
            new_versions.append(decision.version)
            run_requests.append(
                RunRequest(
                    run_key=f"{tenant}:{decision.fingerprint}",
                    partition_key=partition_key(tenant, decision.version),
                    tags={"rag_eval/documents_fingerprint": decision.fingerprint, **run_tags(tenant)},
                )
            )
        partitions_requests = [
            AddDynamicPartitionsRequest(dimension, keys)
            for dimension, keys in ((TENANTS, new_tenants), (DATASET_VERSIONS, new_versions))
            if keys
        ]
        cursor["tenants"] = tenants_state
        return _result(context, run_requests, partitions_requests, reasons, _dump_cursor(cursor))

    return _new_documents


# --- candidate commits -----------------------------------------------------------------------------


def branch_settings() -> dict | None:
    """The git branch to follow (see settings); None when RAG_EVAL_CANDIDATE_REPO is unset."""
    followed = settings.load().followed_branch
    return followed.model_dump() if followed else None


def audit_run_request(candidate: inbox.CandidateCommit, version: str, main_branch: str = "main") -> RunRequest:
    """main_branch: the followed branch, whose passing candidates set and move the baseline, whatever its name."""
    report = ReportConfig(branch=candidate.branch, main_branch=main_branch)
    return RunRequest(
        run_key=candidate.run_key,
        partition_key=partition_key(candidate.tenant, version),
        run_config=lineage_run_config(audit_job.name, candidate.candidate, candidate.commit, report, log_level=None),
        tags={
            COMMIT_TAG: candidate.commit,
            "rag_eval/candidate_source": candidate.source,
            "rag_eval/branch": candidate.branch,
            **run_tags(candidate.tenant),
        },
    )


def build_candidate_commit_sensor(
    manifests_root: Path | None = None,
    warehouse_root: Path | None = None,
    branch: dict | None = None,
    name: str = "candidate_commit_sensor",
):
    """A sensor over candidate manifests and, if configured, a git branch (defaults: the env, read at each tick).

    branch: {"repo", "branch", "tenant", "entry"}; every new commit on it is audited with that entry point.
    """

    @sensor(
        name=name,
        job=audit_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description="Each new candidate commit (manifest file or git branch) is audited on its tenant's current golden set.",
    )
    def _candidate_commits(context: SensorEvaluationContext):
        current = settings.load()
        folder, warehouse = (
            Path(manifests_root or current.candidates_root),
            Path(warehouse_root or current.warehouse_root),
        )
        followed = branch if branch is not None else branch_settings()
        cursor = _load_cursor(context.cursor)
        known = set(context.instance.get_dynamic_partitions(TENANTS))
        registered = set(context.instance.get_dynamic_partitions(DATASET_VERSIONS))

        store = WarehouseResource(root=str(warehouse), database_url=current.production.database_url).store()

        def golden(tenant: str) -> str | None:
            return latest_version(store, tenant, among=registered)

        run_requests, reasons = [], []
        seen = cursor.get("manifests", {})
        main_branch = followed["branch"] if followed else "main"
        cursor["manifests"] = _scan_manifests(folder, seen, known, golden, run_requests, reasons, main_branch, store)
        if followed:
            cursor["git"] = _follow_branch(followed, cursor.get("git"), known, golden, run_requests, reasons)
        return _result(context, run_requests, [], reasons, _dump_cursor(cursor))

    return _candidate_commits


def _scan_manifests(folder, seen, known, golden, run_requests, reasons, main_branch: str, store) -> dict:
    """Handle each new or changed manifest once; one waiting for a golden set is retried next tick."""
    handled = {}
    for name, digest in inbox.manifest_files(folder).items():
        if seen.get(name) == digest:
            handled[name] = digest
            continue
        try:
            candidate = inbox.parse_manifest(folder / name, known)
        except inbox.ManifestError as error:
            reasons.append(f"skipped manifest {error}")
            handled[name] = digest  # a broken file is reported once, and again only when edited
            continue
        version = golden(candidate.tenant)
        if version is None:
            reasons.append(f"{name}: tenant {candidate.tenant!r} has no published golden set yet")
            continue
        try:
            # An outputs file goes to the tenant's results store now: the run's config names it by its id.
            spec = submitted(store, candidate.tenant, version, candidate.commit, candidate.candidate)
            run_requests.append(audit_run_request(replace(candidate, candidate=spec), version, main_branch))
        except CandidateError as error:  # its outputs file is read now, and may be unreadable
            reasons.append(f"skipped manifest {name}: {error}")
        handled[name] = digest
    return handled


def _follow_branch(followed, git_state, known, golden, run_requests, reasons) -> dict:
    """Audit every commit after the cursor; the cursor moves only past commits that were requested."""
    git_state = dict(git_state or {})
    origin = f"{followed['repo']}@{followed['branch']}"
    if git_state.get("origin") != origin:
        git_state = {"origin": origin}  # another repo or branch: the old cursor means nothing there
    tenant = followed["tenant"]
    if tenant not in known:
        reasons.append(f"git branch {origin}: unknown tenant {tenant!r} (set RAG_EVAL_CANDIDATE_TENANT)")
        return git_state
    try:
        entry = CandidateSpec.entry(followed["entry"])
        commits = inbox.new_commits(Path(followed["repo"]), followed["branch"], git_state.get("last_seen"))
    except (inbox.GitError, CandidateError) as error:
        reasons.append(f"git branch {origin}: {error}")
        return git_state
    if not commits:
        return git_state
    version = golden(tenant)
    if version is None:
        reasons.append(f"git branch {origin}: tenant {tenant!r} has no published golden set yet")
        return git_state
    for commit in commits:
        candidate = inbox.CandidateCommit(tenant, commit, entry, origin, followed["branch"])
        run_requests.append(audit_run_request(candidate, version, followed["branch"]))
    git_state["last_seen"] = commits[-1]
    return git_state


new_documents_sensor = build_new_documents_sensor()
candidate_commit_sensor = build_candidate_commit_sensor()

SENSORS = [new_documents_sensor, candidate_commit_sensor]
