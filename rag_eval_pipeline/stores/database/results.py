"""The results store of production mode: the evaluation records in Postgres, one tenant per transaction.

`DatabaseStore` offers what the pipeline asks of the local `Warehouse` for its results: a partition's
tables, the golden-set manifest, an audit's tables and its report, and the outputs submitted before a run
(a result_tables row keyed by the commit and the submission id) (the baselines are in baselines.py). Every statement runs inside `ResultsDatabase.tenant(tenant)`, so
row-level security confines it to that tenant's rows whatever it selects.

Writes are keyed by commit and run (two audits never touch each other's rows) and a table is replaced in
one transaction (a reader sees the old rows or the new ones, never half of them).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timezone
from pathlib import PurePath, PurePosixPath

import pandas as pd
from sqlalchemy import delete, func, insert, select, true
from sqlalchemy.dialects.postgresql import insert as pg_insert

from rag_eval_pipeline.core.judging.results import SCORE_COLUMNS
from rag_eval_pipeline.core.names import validate_commit, validate_name, validate_run_id
from rag_eval_pipeline.stores.database import schema
from rag_eval_pipeline.stores.database.connection import LOCK_TIMEOUT_VARIABLE, LockNotGranted, ResultsDatabase
from rag_eval_pipeline.stores.layout import (
    MANIFEST_FILE,
    REPORT_TABLE,
    VERSION_LOCK_TIMEOUT_S,
    AuditReport,
    StoredReport,
    history_rows,
)
from rag_eval_pipeline.stores.protocols import SUBMITTED_OUTPUTS, validate_submission_id

SCORES_TABLE = "metric_scores"  # kept as rows; its marker in result_tables has no Parquet
RECORD_COLUMN = "record"  # a submission's table: one JSON line per row
TENANT_TABLES_VERSION = ""  # the dataset_version of a tenant's own tables: no version name is empty


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _frame(blob: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(blob))


class DatabaseStore:
    """The tenant-scoped results tables; `root` names where they are, for messages and metadata."""

    def __init__(self, db: ResultsDatabase):
        self.db = db
        self.root = "the results database"

    # --- a partition's own tables (the golden set, its rejected items) ---

    def write(self, tenant: str, version: str, name: str, frame: pd.DataFrame) -> str:
        self._replace_table(tenant, version, name, "", "", frame)
        return self.where(tenant, version, name)

    def read(self, tenant: str, version: str, name: str) -> pd.DataFrame:
        frame = self._read_table(tenant, version, name, "", "")
        if frame is None:
            raise FileNotFoundError(
                f"no {name!r} table for tenant {tenant!r}, dataset version {version!r} in the results database: "
                "materialize it first"
            )
        return frame

    def exists(self, tenant: str, version: str, name: str) -> bool:
        return self._read_table(tenant, version, name, "", "") is not None

    def where(self, tenant: str, version: str, name: str, commit: str = "", run_id: str = "") -> str:
        audit = f" commit={commit} run={run_id}" if commit else ""
        return f"postgres rag_eval.result_tables {tenant}/{version}/{name}{audit}"

    # --- the golden-set manifest ---

    def read_text(self, tenant: str, version: str, filename: str) -> str | None:
        _only_manifest(filename)
        with self.db.tenant(tenant) as connection:
            found = connection.execute(
                select(schema.golden_manifests.c.manifest).where(
                    schema.golden_manifests.c.dataset_version == validate_name("dataset version", version)
                )
            ).scalar_one_or_none()
        return None if found is None else json.dumps(found, indent=2, ensure_ascii=False) + "\n"

    def text_location(self, tenant: str, version: str, filename: str) -> str:
        return f"postgres:rag_eval.golden_manifests/{tenant}/{version}"

    def write_text(self, tenant: str, version: str, filename: str, text: str) -> str:
        """Publish a manifest once: a second, concurrent publication of the version keeps the first."""
        _only_manifest(filename)
        manifest = json.loads(text)
        row = {
            "tenant_id": tenant,
            "dataset_version": validate_name("dataset version", version),
            "content_hash": manifest["content_hash"],
            "manifest": manifest,
        }
        with self.db.tenant(tenant) as connection:
            connection.execute(pg_insert(schema.golden_manifests).values(**row).on_conflict_do_nothing())
        return self.text_location(tenant, version, filename)

    @contextmanager
    def version_lock(self, tenant: str, version: str) -> Iterator[None]:
        """Hold the version's lock, as the local warehouse's file lock does: a transaction-scoped advisory
        lock on a connection of its own (exclusive across processes and machines, released when the block
        ends however it ends, or when the holder's connection dies), reentrant in one thread. Waits at most
        VERSION_LOCK_TIMEOUT_S and never longer than the session's lock timeout; then TimeoutError."""
        key = f"rag_eval.version.{validate_name('tenant', tenant)}/{validate_name('dataset version', version)}"
        try:
            with self.db.exclusive(key, VERSION_LOCK_TIMEOUT_S):
                yield
        except LockNotGranted as error:
            if error.key != key:  # another lock, taken inside the block
                raise
            raise TimeoutError(
                f"{tenant}/{version} stayed locked by another run for {error.waited_s:g} s "
                f"({LOCK_TIMEOUT_VARIABLE}): re-run when it has finished"
            ) from error

    def manifest_texts(self, tenant: str) -> dict[str, str]:
        """{version: manifest JSON} of every published version of the tenant."""
        with self.db.tenant(tenant) as connection:
            rows = connection.execute(
                select(schema.golden_manifests.c.dataset_version, schema.golden_manifests.c.manifest)
            ).all()
        return {version: json.dumps(manifest) for version, manifest in rows}

    # --- an audit's tables: keyed by commit and run ---

    def write_audit_table(
        self, tenant: str, version: str, commit: str, run_id: str, name: str, frame: pd.DataFrame
    ) -> str:
        if name == SCORES_TABLE:
            self._replace_scores(tenant, version, commit, run_id, frame)
        else:
            self._replace_table(tenant, version, name, commit, run_id, frame)
        return self.where(tenant, version, name, commit, run_id)

    def read_audit_table(
        self, tenant: str, version: str, run_id: str, name: str, commit: str | None = None
    ) -> pd.DataFrame | None:
        """The table a run wrote (of `commit`, or whatever its commit: Dagster run ids are unique); None
        when it wrote none."""
        if name == SCORES_TABLE:
            return self._read_scores(tenant, version, run_id, commit)
        return self._read_table(tenant, version, name, commit or None, validate_run_id(run_id))

    def report_location(self, tenant: str, version: str, commit: str, run_id: str) -> PurePath:
        """Where the report is, as a path-like name for messages (the report is a row, not a file)."""
        return PurePosixPath(f"postgres:rag_eval.regression_reports/{tenant}/{version}/commit={commit}/run={run_id}")

    def write_report(
        self, tenant: str, version: str, commit: str, run_id: str, report: StoredReport, parameters: dict
    ) -> None:
        """The rendered report and the tolerances it was judged with, in one transaction."""
        key = {
            "tenant_id": tenant,
            "dataset_version": version,
            "commit": validate_commit(commit),
            "run_id": validate_run_id(run_id),
        }
        with self.db.tenant(tenant) as connection:
            for table, values in (
                (
                    schema.regression_reports,
                    {
                        "verdict": report.verdict,
                        "summary": report.summary,
                        "markdown": report.markdown,
                        "html": report.html,
                    },
                ),
                (schema.test_parameters, {"parameters": parameters}),
            ):
                statement = pg_insert(table).values(**key, **values)
                connection.execute(
                    statement.on_conflict_do_update(
                        constraint=f"pk_{table.name}", set_=dict(values, created_at=func.now())
                    )
                )

    def read_report(self, tenant: str, version: str, run_id: str) -> StoredReport | None:
        table = schema.regression_reports
        with self.db.tenant(tenant) as connection:
            row = connection.execute(
                select(table.c.verdict, table.c.summary, table.c.markdown, table.c.html).where(
                    table.c.dataset_version == version, table.c.run_id == validate_run_id(run_id)
                )
            ).one_or_none()
        return None if row is None else StoredReport(*row)

    def latest_reports(self, tenant: str, version: str, limit: int) -> list[AuditReport]:
        """The version's `limit` latest reports, newest first, with their tables: one statement in the tenant's
        transaction. The latest reports come from regression_reports by its (tenant_id, created_at) index, the
        row-level security policy supplying the tenant; each report's table is its result_tables row, found by
        primary key. Neither reads another tenant's rows, nor a report's Markdown or HTML."""
        version = validate_name("dataset version", version)
        query = latest_reports_query(version, limit)
        with self.db.tenant(tenant) as connection:
            rows = connection.execute(query).all()
        return [
            AuditReport(
                commit=commit,
                run_id=run_id,
                written_at=created_at.astimezone(timezone.utc).isoformat(),
                verdict=verdict,
                rows=history_rows(blob) if blob else None,
                location=self.report_location(tenant, version, commit, run_id),
            )
            for commit, run_id, verdict, created_at, blob in rows
        ]

    def locations(self, tenant: str, version: str, run_id: str) -> list[str]:
        """Where a run's results are, for a person to find them: rows, not files."""
        return [f"results for {tenant}/{version} (run {run_id}): {self.root}, schema rag_eval, tenant {tenant}"]

    # --- outputs submitted before a run: a result_tables row per submission, under its commit ---

    def write_submission(self, tenant: str, version: str, commit: str, submission_id: str, text: str) -> str:
        frame = pd.DataFrame({RECORD_COLUMN: text.split("\n")})
        self._replace_table(tenant, version, SUBMITTED_OUTPUTS, commit, validate_submission_id(submission_id), frame)
        return self.where(tenant, version, SUBMITTED_OUTPUTS, commit, submission_id)

    def read_submission(self, tenant: str, version: str, submission_id: str) -> str | None:
        """A submission's text, whatever its commit (ids are unique); None when this tenant's version has none
        by that id (row-level security: another tenant's submission is not there)."""
        frame = self._read_table(tenant, version, SUBMITTED_OUTPUTS, None, validate_submission_id(submission_id))
        return None if frame is None else "\n".join(frame[RECORD_COLUMN])

    # --- a tenant's own tables (labels, calibrations): result_tables rows of no dataset version ---

    def write_tenant_table(self, tenant: str, name: str, frame: pd.DataFrame) -> str:
        self._replace_row(tenant, TENANT_TABLES_VERSION, validate_name("table", name), "", "", frame)
        return f"{self.root}: {tenant}'s {name}"

    def read_tenant_table(self, tenant: str, name: str) -> pd.DataFrame | None:
        return self._read_row(tenant, TENANT_TABLES_VERSION, validate_name("table", name), "", "")

    @contextmanager
    def tenant_table_lock(self, tenant: str, name: str) -> Iterator[None]:
        key = f"rag_eval.tenant_table.{validate_name('tenant', tenant)}/{validate_name('table', name)}"
        try:
            with self.db.exclusive(key, VERSION_LOCK_TIMEOUT_S):
                yield
        except LockNotGranted as error:
            if error.key != key:
                raise
            raise TimeoutError(
                f"{tenant}'s {name} stayed locked by another run for {error.waited_s:g} s "
                f"({LOCK_TIMEOUT_VARIABLE}): re-run when it has finished"
            ) from error

    # --- internals ---

    def _replace_table(
        self, tenant: str, version: str, name: str, commit: str, run_id: str, frame: pd.DataFrame
    ) -> None:
        commit = validate_commit(commit) if commit else ""
        run_id = validate_run_id(run_id) if run_id else ""
        self._replace_row(tenant, validate_name("dataset version", version), name, commit, run_id, frame)

    def _replace_row(self, tenant: str, version: str, name: str, commit: str, run_id: str, frame: pd.DataFrame) -> None:
        table = schema.result_tables
        key = {"tenant_id": tenant, "dataset_version": version, "table_name": name, "commit": commit, "run_id": run_id}
        values = {"row_count": len(frame), "parquet": _parquet(frame)}
        with self.db.tenant(tenant) as connection:
            connection.execute(
                pg_insert(table)
                .values(**key, **values)
                .on_conflict_do_update(constraint="pk_result_tables", set_=dict(values, created_at=func.now()))
            )

    def _read_table(self, tenant: str, version: str, name: str, commit: str | None, run_id: str) -> pd.DataFrame | None:
        """A stored table; commit None: the run's audit table whatever its commit ('' is a partition's own)."""
        return self._read_row(tenant, validate_name("dataset version", version), name, commit, run_id)

    def _read_row(self, tenant: str, version: str, name: str, commit: str | None, run_id: str) -> pd.DataFrame | None:
        table = schema.result_tables
        of_commit = table.c.commit != "" if commit is None else table.c.commit == commit
        with self.db.tenant(tenant) as connection:
            blob = connection.execute(
                select(table.c.parquet).where(
                    table.c.dataset_version == version,
                    table.c.table_name == name,
                    of_commit,
                    table.c.run_id == run_id,
                )
            ).scalar_one_or_none()
        return None if blob is None else _frame(blob)

    def _replace_scores(self, tenant: str, version: str, commit: str, run_id: str, frame: pd.DataFrame) -> None:
        """The rows, and a marker row in result_tables, in one transaction: the marker says the scores are
        whole (an audit whose writer died before them has none, and is not read as scoring nothing)."""
        table = schema.metric_scores
        key = {
            "tenant_id": tenant,
            "dataset_version": version,
            "commit": validate_commit(commit),
            "run_id": validate_run_id(run_id),
        }
        mismatched = sorted({str(c) for c in frame["commit"].dropna()} - {commit})
        if mismatched:
            raise ValueError(f"score rows of commits {mismatched} cannot be stored under commit {commit!r}")
        rows = [
            {**key, "row_no": number, **_score_row(row)}
            for number, row in enumerate(frame.reindex(columns=SCORE_COLUMNS).to_dict("records"))
        ]
        marker = {**key, "table_name": SCORES_TABLE, "row_count": len(rows), "parquet": b""}
        with self.db.tenant(tenant) as connection:
            # The marker's upsert first: it locks the key, so two writers of one audit take turns.
            connection.execute(
                pg_insert(schema.result_tables)
                .values(**marker)
                .on_conflict_do_update(
                    constraint="pk_result_tables", set_={"row_count": len(rows), "created_at": func.now()}
                )
            )
            connection.execute(
                delete(table).where(
                    *(table.c[column] == value for column, value in key.items() if column != "tenant_id")
                )
            )
            if rows:
                connection.execute(insert(table), rows)

    def _read_scores(self, tenant: str, version: str, run_id: str, commit: str | None) -> pd.DataFrame | None:
        table = schema.metric_scores
        columns = [table.c[name] for name in SCORE_COLUMNS]
        of_commit = [table.c.commit == commit] if commit else []
        with self.db.tenant(tenant) as connection:
            if not _scores_written(connection, version, run_id, commit):
                return None
            rows = connection.execute(
                select(*columns)
                .where(
                    table.c.dataset_version == version,
                    table.c.run_id == validate_run_id(run_id),
                    *of_commit,
                )
                .order_by(table.c.commit, table.c.row_no)
            ).all()
        frame = pd.DataFrame(rows, columns=SCORE_COLUMNS)
        frame["score"] = frame["score"].astype(float)
        return frame


def latest_reports_query(version: str, limit: int):
    """DatabaseStore.latest_reports's one statement (row-level security adds the tenant): the latest `limit`
    reports of the version from regression_reports (its (tenant_id, created_at) index, read backward), each
    with its report table from result_tables, looked up by primary key in a LATERAL subquery: the statement
    reads `limit` report tables, however long the tenant's history (a plain join may read them all)."""
    reports, tables = schema.regression_reports, schema.result_tables
    recent = (
        select(reports.c.commit, reports.c.run_id, reports.c.verdict, reports.c.created_at)
        .where(reports.c.dataset_version == version)
        .order_by(reports.c.created_at.desc(), reports.c.run_id.desc())
        .limit(max(0, limit))
        .subquery("recent")
    )
    report_table = (
        select(tables.c.parquet)
        .where(
            tables.c.dataset_version == version,
            tables.c.table_name == REPORT_TABLE,
            tables.c.commit == recent.c.commit,
            tables.c.run_id == recent.c.run_id,
        )
        .limit(1)  # the key is unique; the limit keeps the planner from flattening this into a join
        .lateral("report_table")
    )
    return (
        select(recent.c.commit, recent.c.run_id, recent.c.verdict, recent.c.created_at, report_table.c.parquet)
        .select_from(recent.outerjoin(report_table, true()))
        .order_by(recent.c.created_at.desc(), recent.c.run_id.desc())
    )


def _score_row(row: dict) -> dict:
    """A score row's stored columns; an absent text is '' and an absent k 0 (NULL only for a missing score)."""
    given = {name: value for name, value in row.items() if not _missing(value)}
    text = {
        name: _storable(str(given.get(name, default)))
        for name, default in (
            ("qa_id", ""),
            ("metric", ""),
            ("status", ""),
            ("reason", ""),
            ("evidence", "{}"),
            ("judge", ""),
            ("trace_id", ""),
            ("span_id", ""),
        )
    }
    return {**text, "score": float(given["score"]) if "score" in given else None, "k": int(given.get("k", 0))}


def _storable(text: str) -> str:
    """Postgres text holds no NUL character (a candidate's error message may): it becomes U+FFFD."""
    return text.replace("\x00", "\ufffd")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _scores_written(connection, version: str, run_id: str, commit: str | None) -> bool:
    """Whether the run's scores were written whole (their marker row), even if there are none."""
    table = schema.result_tables
    of_commit = [table.c.commit == commit] if commit else []
    return (
        connection.execute(
            select(func.count())
            .select_from(table)
            .where(
                table.c.dataset_version == version,
                table.c.run_id == run_id,
                table.c.table_name == SCORES_TABLE,
                *of_commit,
            )
        ).scalar_one()
        > 0
    )


def _only_manifest(filename: str) -> None:
    if filename != MANIFEST_FILE:
        raise ValueError(f"the results database keeps no document {filename!r}")
