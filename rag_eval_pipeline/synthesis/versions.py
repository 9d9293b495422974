"""Published golden sets are immutable; a change makes a new dataset version.

A golden set is published by writing `golden_set.manifest.json` beside its table, last, whole and
only if no other is there (a compare-and-set), and only once its blocking checks have passed (a golden
set without items never is): the manifest holds the hash of its content,
its size, its counts per question type, when and from what it was made. A version without a manifest
(killed mid-way, or failing its checks) is never audited or picked as the latest. Once published,
the same (tenant, version) may be published again only with the same content (re-runs are
deterministic); anything else must go to a new version, so scores measured on a version always
refer to the same questions. `diff_versions` says what changed between two versions.

Everything a published golden set was built from is as immutable as the golden set: every write of a
version's table goes through `must_write` under the version's lock, which refuses a table of a published
version that differs from the stored one (before anything is written) and skips one that equals it. A
synthesized golden set is published by `publish_snapshot`, under the same lock, only when it and every
table it was built from are one snapshot (core.version_tables), so two runs of one version that read
different documents never publish a mixture.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import pandas as pd
from pydantic import TypeAdapter, ValidationError

from rag_eval_pipeline.core.names import validate_name
from rag_eval_pipeline.core.text import sha256
from rag_eval_pipeline.stores.layout import MANIFEST_FILE, SYNTHESIS_TABLES
from rag_eval_pipeline.stores.protocols import ResultsStore
from rag_eval_pipeline.stores.version_tables import VersionTables, differences, snapshot_problems, table_digest

# What an item *is*; bookkeeping columns (generator, review status, ranks) do not change its identity.
CONTENT_COLUMNS = ("qa_id", "question", "ground_truth", "gold_chunk_ids", "question_type")
DIFF_COLUMNS = ["change", "qa_id", "question_type", "question", "derived_from", "old_question"]
CHANGES = ("added", "removed", "edited")


class GoldenSetImmutable(ValueError):
    """A published golden set was about to be replaced by different content."""


class PublishedVersionImmutable(GoldenSetImmutable):
    """A table a published golden set was built from was about to be replaced by different content."""


class MixedSnapshot(ValueError):
    """A golden set whose tables are not one snapshot (other runs wrote some of them): not published."""


@dataclass(frozen=True)
class Manifest:
    tenant: str
    dataset_version: str
    content_hash: str
    n_items: int
    counts_by_type: dict[str, int]
    published_at: str  # UTC, ISO 8601
    source: str  # "synthesis" or "review of <version>"
    parent_version: str | None


_MANIFEST = TypeAdapter(Manifest)  # checks a manifest read back: a hand-edited one fails in one line


def content_hash(golden: pd.DataFrame) -> str:
    """sha256 over the items' content, independent of row and column order."""
    missing = [c for c in CONTENT_COLUMNS if c not in golden.columns]
    if missing:
        raise ValueError(f"golden set lacks the columns {missing}")
    rows = sorted(_item_key(row) for row in golden[list(CONTENT_COLUMNS)].to_dict("records"))
    return sha256("\n".join(rows))


def _item_key(row: dict) -> str:
    return json.dumps(
        [
            str(row["qa_id"]),
            str(row["question"]),
            str(row["ground_truth"]),
            [str(c) for c in _as_list(row["gold_chunk_ids"])],
            str(row["question_type"]),
        ],
        ensure_ascii=False,
    )


def _as_list(value) -> list:
    """Parquet gives list columns back as numpy arrays."""
    if value is None:
        return []
    return value.tolist() if hasattr(value, "tolist") else list(value)


class GoldenSetUnpublished(ValueError):
    """A golden set that is not (or no longer matches what was) published: nothing may be audited on it."""


def check_publishable(warehouse: ResultsStore, tenant: str, version: str, golden: pd.DataFrame) -> str:
    """The content hash, or GoldenSetImmutable when the version was published with other content."""
    digest = content_hash(golden)
    existing = read_manifest(warehouse, tenant, version)
    if existing is not None and existing.content_hash != digest:
        raise GoldenSetImmutable(
            f"the golden set of {tenant}/{version} is published (content hash {existing.content_hash[:12]}, "
            f"{existing.published_at}, {existing.n_items} items) and cannot change; this content hashes to "
            f"{digest[:12]}. Re-synthesis makes a new version: `rag-eval register --tenant {tenant} --version <new>`"
        )
    return digest


def require_published(warehouse: ResultsStore, tenant: str, version: str, golden: pd.DataFrame) -> Manifest:
    """The manifest of a published golden set whose table is the one given; GoldenSetUnpublished otherwise."""
    manifest = read_manifest(warehouse, tenant, version)
    if manifest is None:
        raise GoldenSetUnpublished(
            f"the golden set of {tenant}/{version} is not published: its synthesis did not finish or its blocking "
            "checks (golden_set_expectations) did not pass, so no candidate can be audited on it"
        )
    require_items(manifest)
    if manifest.content_hash != content_hash(golden):
        raise GoldenSetUnpublished(
            f"the golden_set table of {tenant}/{version} does not match its published manifest "
            f"(content hash {manifest.content_hash[:12]}): refusing to audit on it"
        )
    return manifest


def require_items(manifest: Manifest) -> Manifest:
    """A published golden set with no item (publication refuses one now; an older or hand-written manifest
    may say so) has nothing to audit: refused in one line rather than failing inside an audit."""
    if manifest.n_items < 1:
        raise GoldenSetUnpublished(
            f"the golden set of {manifest.tenant}/{manifest.dataset_version} has no items: nothing can be audited "
            "or gated on it; gate on a version with items (--version)"
        )
    return manifest


def publish(
    warehouse: ResultsStore,
    tenant: str,
    version: str,
    golden: pd.DataFrame,
    source: str = "synthesis",
    parent_version: str | None = None,
) -> Manifest:
    """Write the manifest of a first publication; the same content again is a no-op; other content raises.

    Call it once the table is written and checked: the manifest is what makes the version visible. It
    holds the version's lock, so no table of the version is written between its checks and the manifest.
    The manifest is also a compare-and-set: of two publishers of one version at the same time, the first
    keeps it and the other gets GoldenSetImmutable (unless both publish the same content).
    """
    if not len(golden):
        raise ValueError(
            f"the golden set of {tenant}/{version} has no items: a golden set without items is never "
            "published (nothing could be audited on it)"
        )
    with warehouse.version_lock(tenant, version):
        return _publish(warehouse, tenant, version, golden, source, parent_version)


def _publish(
    warehouse, tenant: str, version: str, golden: pd.DataFrame, source: str, parent_version: str | None
) -> Manifest:
    digest = check_publishable(warehouse, tenant, version, golden)
    existing = read_manifest(warehouse, tenant, version)
    if existing is not None:
        return existing
    if content_hash(warehouse.read(tenant, version, "golden_set")) != digest:
        raise GoldenSetUnpublished(f"the golden_set table of {tenant}/{version} on disk is not the one being published")
    manifest = Manifest(
        tenant=tenant,
        dataset_version=version,
        content_hash=digest,
        n_items=int(len(golden)),
        counts_by_type=_counts_by_type(golden),
        published_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        source=source,
        parent_version=parent_version,
    )
    _write_manifest(warehouse, manifest)
    published = read_manifest(warehouse, tenant, version)
    if published is None or published.content_hash != digest:
        raise GoldenSetImmutable(
            f"the golden set of {tenant}/{version} was published by another run at the same time"
            + (f" (content hash {published.content_hash[:12]}, {published.published_at})" if published else "")
            + f"; this content hashes to {digest[:12]} and was not published: use another version"
        )
    return published


def publish_snapshot(
    tables: VersionTables,
    tenant: str,
    version: str,
    golden: pd.DataFrame,
    checked: dict[str, str],
    table_names: tuple[str, ...] = SYNTHESIS_TABLES,
) -> Manifest:
    """Publish a synthesized golden set when it and the tables it was built from (`table_names`) are one
    snapshot; MixedSnapshot (nothing published) when they are not.

    Under the version's lock, which every write of the version's tables takes: what is verified here is
    what the manifest publishes. `checked` (table -> table_digest) names the tables the caller's checks
    read, which must still be the stored ones. A published version is left as publish() leaves it.
    """
    with tables.version_lock(tenant, version):
        if read_manifest(tables.results, tenant, version) is None:
            stored = {name: tables.read_if_stored(tenant, version, name) for name in table_names}
            problems = snapshot_problems(stored)
            problems += [
                f"{name} changed after the check read it"
                for name, digest in sorted(checked.items())
                if (frame := stored.get(name)) is not None and table_digest(frame) != digest
            ]
            if problems:
                raise MixedSnapshot(
                    f"{tenant}/{version} is not published: its tables are not one snapshot ({'; '.join(problems)}); "
                    "another run wrote some of them, or a run stopped half way: run the synthesis job again to publish it"
                )
        return _publish(tables.results, tenant, version, golden, "synthesis", None)


def must_write(tables: VersionTables, tenant: str, version: str, name: str, frame: pd.DataFrame) -> bool:
    """Whether a table of the version is to be written; call it under the version's lock.

    True while the version is unpublished. Once it is published, every table it was built from is
    immutable: False when the stored table is this one already (a re-run of unchanged documents: nothing
    to write), PublishedVersionImmutable when it is not.
    """
    manifest = read_manifest(tables.results, tenant, version)
    if manifest is None:
        return True
    stored = tables.read_if_stored(tenant, version, name)
    changes = ["the published version has no such table"] if stored is None else differences(stored, frame)
    if not changes:
        return False
    raise PublishedVersionImmutable(
        f"{tenant}/{version} is published (golden set {manifest.content_hash[:12]}, {manifest.published_at}) and "
        f"nothing it was built from may change, but this run's {name} table is not the published one "
        f"({'; '.join(changes[:3])}); nothing was written. Re-synthesis makes a new version: "
        f"`rag-eval register --tenant {tenant} --version <new>`, then run it"
    )


def read_manifest(warehouse: ResultsStore, tenant: str, version: str) -> Manifest | None:
    return _parse_manifest(
        warehouse.read_text(tenant, version, MANIFEST_FILE), warehouse.text_location(tenant, version, MANIFEST_FILE)
    )


def _parse_manifest(content: str | None, location: str) -> Manifest | None:
    if content is None:
        return None
    try:
        return _MANIFEST.validate_json(content)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        raise ValueError(f"golden-set manifest {location} is malformed ({where}: {problem['msg']})") from None


def _write_manifest(warehouse: ResultsStore, manifest: Manifest) -> None:
    # Written whole and once (a link of a whole file on disk, an insert that keeps the first row in the
    # database): a half-written manifest would make the version unreadable, a replaced one would change it.
    content = json.dumps(asdict(manifest), indent=2, ensure_ascii=False) + "\n"
    warehouse.write_text(manifest.tenant, manifest.dataset_version, MANIFEST_FILE, content)


def _counts_by_type(golden: pd.DataFrame) -> dict[str, int]:
    counts = golden["question_type"].astype(str).value_counts()
    return {str(k): int(v) for k, v in sorted(counts.items())}


def diff_versions(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """One row per item added, removed or edited between two golden sets (columns DIFF_COLUMNS).

    qa_id is a content hash, so an edited question shows as removed + added, unless the new set says
    where an item came from (`derived_from`, written by a review import): then it is one "edited" row.
    An item whose qa_id stays but whose ground truth changed is "edited" as well.
    """
    old_items = {str(r["qa_id"]): r for r in old.to_dict("records")}
    new_items = {str(r["qa_id"]): r for r in new.to_dict("records")}
    edited_from = _edits(new_items, old_items)  # new qa_id -> old qa_id
    rows = []
    for qa_id, item in old_items.items():
        if qa_id not in new_items and qa_id not in edited_from.values():
            rows.append(_diff_row("removed", item))
    for qa_id, item in new_items.items():
        if qa_id in edited_from:
            rows.append(_diff_row("edited", item, old_items[edited_from[qa_id]]))
        elif qa_id not in old_items:
            rows.append(_diff_row("added", item))
        elif _item_key(item) != _item_key(old_items[qa_id]):
            rows.append(_diff_row("edited", item, old_items[qa_id]))
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def _edits(new_items: dict, old_items: dict) -> dict[str, str]:
    """new qa_id -> old qa_id for new items derived from an old item that is gone."""
    edits = {}
    for qa_id, item in new_items.items():
        parent = _text(item.get("derived_from"))
        if parent and parent != qa_id and parent in old_items and parent not in new_items:
            edits[qa_id] = parent
    return edits


def _diff_row(change: str, item: dict, old_item: dict | None = None) -> dict:
    return {
        "change": change,
        "qa_id": str(item["qa_id"]),
        "question_type": str(item["question_type"]),
        "question": str(item["question"]),
        "derived_from": str(old_item["qa_id"]) if old_item else "",
        "old_question": str(old_item["question"]) if old_item else "",
    }


def _text(value) -> str:
    """A cell as text: missing values (None, NaN) are empty."""
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def diff_summary(diff: pd.DataFrame) -> dict[str, int]:
    """Counts of added, removed and edited items."""
    counts = diff["change"].value_counts()
    return {change: int(counts.get(change, 0)) for change in CHANGES}


def latest_version(warehouse: ResultsStore, tenant: str, among: set[str] | None = None) -> str | None:
    """The tenant's most recently published golden-set version (only those `among`, if given), or None.

    Only whole versions count: a manifest (written last) beside its table.
    """
    manifests = [
        manifest
        for version, content in warehouse.manifest_texts(validate_name("tenant", tenant)).items()
        if among is None or version in among
        if (manifest := _parse_manifest(content, warehouse.text_location(tenant, version, MANIFEST_FILE)))
    ]
    return max(manifests, key=lambda m: (m.published_at, m.dataset_version)).dataset_version if manifests else None


def published_questions(store: ResultsStore, tenant: str, version: str | None) -> tuple[str, pd.DataFrame]:
    """(version, frame of qa_id and question) of the tenant's published golden set (default: its latest);
    ValueError (one line) when there is none."""
    tenant = validate_name("tenant", tenant)
    version = validate_name("dataset version", version) if version else latest_version(store, tenant)
    if version is None or read_manifest(store, tenant, version) is None:
        which = f"{tenant}/{version}" if version else f"tenant {tenant!r}"
        raise GoldenSetUnpublished(f"{which} has no published golden set")
    return version, store.read(tenant, version, "golden_set")[["qa_id", "question"]]
