"""A Great Expectations suite over the golden set: schema, ids, types, gold chunks, groundedness.

Pure: frames and sets in, a `SuiteReport` out; it knows nothing of Dagster. Each call builds an
ephemeral GX context (in memory: no great_expectations/ folder, no files written), validates two
tables and turns GX's results into small outcomes a person can read:

- `golden_set`: the golden set itself, one row per item;
- `gold_chunks`: one row per (item, gold chunk id), so that the ids inside the list column can be
  checked with ordinary column expectations; an item without gold chunk ids keeps one row with a
  null id.

Importing this module imports great_expectations, which takes seconds: import it where it is used.
"""

# great_expectations exports its expectation classes lazily, which pyright reads as private imports.
# pyright: reportPrivateImportUsage=false

from __future__ import annotations

import logging
from dataclasses import dataclass

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)
from great_expectations.expectations.row_conditions import Column

from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS, QUESTION_TYPES, UNANSWERABLE

GOLDEN, GOLD_CHUNKS = "golden_set", "gold_chunks"
# `grounded` too: a null is not "grounded", and the in-set check below skips nulls.
NON_NULL = ("qa_id", "question", "ground_truth", "question_type", "generator", "prompt_version", "grounded")
MIN_QUESTION_CHARS = 10  # shorter than this is no question (verification wants 3+ words)
MAX_EXAMPLES = 5  # values or qa_ids quoted in a detail, each cut to 60 characters
# GX reports the qa_id of each unexpected row, so a failure names the items to look at.
RESULT_FORMAT = {"result_format": "SUMMARY", "unexpected_index_column_names": ["qa_id"]}


@dataclass(frozen=True)
class ExpectationOutcome:
    expectation: str  # GX's expectation type, e.g. "expect_column_values_to_be_unique"
    table: str  # GOLDEN or GOLD_CHUNKS
    column: str  # "" for a table-level expectation
    success: bool
    detail: str  # what was observed, with at most MAX_EXAMPLES examples


@dataclass(frozen=True)
class SuiteReport:
    success: bool
    results: list[ExpectationOutcome]

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [r for r in self.results if not r.success]


def check_golden_set(
    golden: pd.DataFrame,
    chunk_ids: set[str],
    expected_types: set[str],
    min_items: int = 1,
    extra_columns: tuple[str, ...] = (),
) -> SuiteReport:
    """Validate the golden set against the chunks it cites and the question types it must contain.

    extra_columns: columns a golden set may have beside GOLDEN_COLUMNS (a reviewed one: its review columns).
    """
    if min_items < 1:
        raise ValueError(f"min_items must be at least 1 (an empty golden set must fail), got {min_items}")
    context = _ephemeral_context()
    results = _validate(context, GOLDEN, golden, golden_expectations(expected_types, min_items, extra_columns))
    results += _validate(context, GOLD_CHUNKS, gold_chunk_rows(golden), gold_chunk_expectations(chunk_ids))
    return SuiteReport(success=all(r.success for r in results), results=results)


def golden_expectations(
    expected_types: set[str], min_items: int, extra_columns: tuple[str, ...] = ()
) -> list[gxe.Expectation]:
    return [
        gxe.ExpectTableColumnsToMatchSet(column_set=[*GOLDEN_COLUMNS, *extra_columns], exact_match=True),
        gxe.ExpectTableRowCountToBeBetween(min_value=min_items),
        *(gxe.ExpectColumnValuesToNotBeNull(column=column) for column in NON_NULL),
        gxe.ExpectColumnValueLengthsToBeBetween(column="question", min_value=MIN_QUESTION_CHARS),
        gxe.ExpectColumnValuesToBeUnique(column="qa_id"),
        gxe.ExpectColumnValuesToBeInSet(column="question_type", value_set=list(QUESTION_TYPES)),
        # The type mix: every type that was planned in earnest must survive verification.
        gxe.ExpectColumnDistinctValuesToContainSet(column="question_type", value_set=sorted(expected_types)),
        gxe.ExpectColumnValuesToBeInSet(column="grounded", value_set=[True]),
    ]


def gold_chunk_expectations(chunk_ids: set[str]) -> list[gxe.Expectation]:
    return [
        gxe.ExpectColumnValuesToBeInSet(column="gold_chunk_id", value_set=sorted(chunk_ids)),
        # Only an unanswerable question may come without a gold chunk (its list is empty by design).
        gxe.ExpectColumnValuesToNotBeNull(
            column="gold_chunk_id", row_condition=Column("question_type") != UNANSWERABLE
        ),
    ]


def gold_chunk_rows(golden: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, gold chunk id); an item whose list is empty keeps one row with a null id."""
    columns = ["qa_id", "question_type", "gold_chunk_ids"]
    if not set(columns) <= set(golden.columns):
        # The schema expectation names what is missing; the gold chunk expectations then fail on
        # the missing column instead of passing on nothing.
        return pd.DataFrame()
    rows = golden[columns].explode("gold_chunk_ids", ignore_index=True)
    return rows.rename(columns={"gold_chunk_ids": "gold_chunk_id"})


def failures_markdown(report: SuiteReport) -> str:
    """The failed expectations as a Markdown table, or a line saying there are none."""
    if report.success:
        return "All expectations passed."
    lines = ["| table | expectation | column | detail |", "| --- | --- | --- | --- |"]
    for r in report.failures:
        lines.append(f"| {r.table} | {r.expectation} | {r.column or '-'} | {_cell(r.detail)} |")
    return "\n".join(lines)


def _ephemeral_context():
    # In memory only, and quiet: no progress bars on stderr, no INFO chatter from GX's loggers.
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        progress_bars=ProgressBarsConfig(globally=False),
        analytics_enabled=False,
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def _validate(context, name: str, frame: pd.DataFrame, expectations: list) -> list[ExpectationOutcome]:
    batch_definition = (
        context.data_sources.add_pandas(name).add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
    )
    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
    result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format=RESULT_FORMAT
    )
    # GX groups its results by domain; report them in the order of the suite.
    order = {e.id: i for i, e in enumerate(suite.expectations)}
    ordered = sorted(result.results, key=lambda r: order.get(r.expectation_config.id, len(order)))
    return [_outcome(name, r) for r in ordered]


def _outcome(table: str, result) -> ExpectationOutcome:
    config = result.expectation_config
    return ExpectationOutcome(
        expectation=config.type,
        table=table,
        column=str(config.kwargs.get("column") or ""),
        success=bool(result.success),
        detail=_detail(result),
    )


def _detail(result) -> str:
    error = _error_message(result.exception_info)
    if error:
        return error
    found = result.result or {}
    if "unexpected_count" in found:
        return _unexpected_detail(found)
    if "partial_missing_list" in found:
        return f"missing {_examples(found['partial_missing_list'])}" if found["missing_count"] else "none missing"
    mismatched = (found.get("details") or {}).get("mismatched")
    if mismatched:
        return "; ".join(f"{kind}: {_examples(values)}" for kind, values in sorted(mismatched.items()))
    observed = found.get("observed_value")
    return f"observed {_examples(observed) if isinstance(observed, list) else observed}"


def _unexpected_detail(found: dict) -> str:
    text = f"{found['unexpected_count']} of {found['element_count']} rows unexpected"
    if not found["unexpected_count"]:
        return text
    values = [v for v in found.get("partial_unexpected_list", []) if not pd.isna(v)]
    qa_ids = [row.get("qa_id") for row in found.get("partial_unexpected_index_list") or [] if isinstance(row, dict)]
    if set(map(str, qa_ids)) <= set(map(str, values)):
        qa_ids = []  # the values are the qa_ids (the uniqueness of qa_id): say them once
    parts = [f"values {_examples(values)}" if values else "", f"qa_id {_examples(qa_ids)}" if qa_ids else ""]
    return ": ".join([text, ", ".join(p for p in parts if p)]) if any(parts) else text


def _error_message(info) -> str:
    """GX puts an exception either at the top of exception_info or under each failed metric."""
    if not isinstance(info, dict):
        return ""
    if info.get("raised_exception"):
        return str(info.get("exception_message") or "raised an exception")[:200]
    nested = [_error_message(v) for v in info.values() if isinstance(v, dict)]
    return next((m for m in nested if m), "")


def _examples(values) -> str:
    distinct = list(dict.fromkeys(_short(str(v)) for v in values))
    more = ", ..." if len(distinct) > MAX_EXAMPLES else ""
    return "[" + ", ".join(distinct[:MAX_EXAMPLES]) + more + "]"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")
