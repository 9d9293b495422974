"""Asset checks of the synthesis track: the golden set against its great-expectations suite.

The check is blocking: when it fails, the assets downstream of golden_set (candidate_outputs and
what follows) do not run in the same run, so no candidate is scored against a broken golden set. It
is also where a golden set is published: its manifest is written only when the suite passes and the
golden set and every table it was built from are one snapshot (no other run wrote some of them
meanwhile), so a later gate never picks a version that failed (or was killed before) its check.
"""

# No `from __future__ import annotations` here: Dagster resolves resource and input types from the
# live annotations of the check function.

import pandas as pd
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetIn,
    MetadataValue,
)

from rag_eval_pipeline.partitions import partitioned_asset_check, split_key
from rag_eval_pipeline.stores.version_tables import table_digest
from rag_eval_pipeline.synthesis.versions import MixedSnapshot, publish_snapshot

PLAN_TABLE = "synthesis_plan"  # written with golden_set: question_type, requested, planned, generated, kept, note
# A type planned with at least this many items must have one left after verification; with fewer,
# losing them all can be bad luck rather than a broken generator or verifier.
MIN_PLANNED = 3


@partitioned_asset_check(
    asset="golden_set",
    blocking=True,
    # Everything the check reads is an input, so the graph shows it and the IO manager loads it.
    additional_ins={"document_chunks": AssetIn("document_chunks"), PLAN_TABLE: AssetIn(PLAN_TABLE)},
    # The IO manager knows where each table of the version is: publication reads them all again.
    required_resource_keys={"io_manager"},
    description="Great Expectations suite on the golden set: exact columns, non-null fields, unique "
    "qa_id, known question types, gold chunk ids among the chunks, the planned type mix, all grounded. "
    "When it passes and the golden set and every table it was built from are one snapshot, the golden "
    "set is published (its manifest is written); otherwise it is not.",
)
def golden_set_expectations(
    context: AssetCheckExecutionContext,
    golden_set: pd.DataFrame,
    document_chunks: pd.DataFrame,
    synthesis_plan: pd.DataFrame,
) -> AssetCheckResult:
    # Imported here: great_expectations takes seconds to import, and loading the code location
    # (every `dagster` command, every test that imports the definitions) should not pay for it.
    from rag_eval_pipeline.synthesis.expectations import check_golden_set, failures_markdown

    tenant, version = split_key(context.partition_key)
    expected = expected_types(synthesis_plan)
    report = check_golden_set(golden_set, set(document_chunks["chunk_id"]), expected)
    failed = report.failures
    # Publishing is this check's last step: a golden set that fails it is never visible to a gate.
    manifest, refusal = None, None
    if report.success:
        checked = {"golden_set": golden_set, "document_chunks": document_chunks, PLAN_TABLE: synthesis_plan}
        try:
            manifest = publish_snapshot(
                context.resources.io_manager.version_tables(),
                tenant,
                version,
                golden_set,
                {name: table_digest(frame) for name, frame in checked.items()},
            )
        except MixedSnapshot as error:
            refusal = str(error)
    return AssetCheckResult(
        passed=manifest is not None,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "items": len(golden_set),
            "chunks": len(document_chunks),
            "expected_types": ", ".join(sorted(expected)) or "none",
            "expectations": len(report.results),
            "failed_expectations": len(failed),
            "failures": MetadataValue.md(refusal or failures_markdown(report)),
            "published": f"{tenant}/{version}, content hash {manifest.content_hash[:12]}"
            if manifest
            else f"no: {refusal}"
            if refusal
            else "no: a golden set that fails its checks is not published",
        },
    )


def expected_types(plan: pd.DataFrame) -> set[str]:
    """The question types the plan asked for in earnest; none for an empty plan."""
    return {str(t) for t in plan.loc[plan["planned"] >= MIN_PLANNED, "question_type"]}


SYNTHESIS_CHECKS = [golden_set_expectations]
