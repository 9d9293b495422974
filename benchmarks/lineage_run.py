"""Rows at each stage of the lineage, and how long each stage takes, for a folder of documents.

    .venv/bin/python benchmarks/lineage_run.py --docs data/tenants/demo --name demo
    .venv/bin/python benchmarks/lineage_run.py --docs ../shared/corpus/pdfs --name shared-pdfs

Runs the full lineage in process against a temporary instance and warehouse (nothing of the
repo's own warehouse is touched) and writes benchmarks/results/lineage_<name>.json.
Also times loading the code location (`import rag_eval_pipeline.definitions`) in fresh processes.
"""

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from dagster import instance_for_test, materialize

from rag_eval_pipeline.definitions import ALL_ASSETS, local_resources
from rag_eval_pipeline.partitions import register_partition
from rag_eval_pipeline.stores.layout import AUDIT_TABLES
from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.checks import SYNTHESIS_CHECKS

STAGES = [
    "raw_documents",
    "rejected_documents",
    "document_chunks",
    "chunk_clusters",
    "synthetic_qa",
    "golden_set",
    "rejected_qa",
    "candidate_outputs",
    "metric_scores",
    "regression_report",
]
RESULTS = Path(__file__).resolve().parent / "results"


def run_lineage(docs: Path) -> dict:
    with tempfile.TemporaryDirectory() as scratch, instance_for_test() as instance:
        documents_root = Path(scratch) / "documents"
        documents_root.mkdir()
        # A copy, not a link: a tenant's folder that is a symbolic link is refused (resources/documents.py).
        shutil.copytree(docs.resolve(), documents_root / "bench")
        resources = local_resources(documents_root, Path(scratch) / "warehouse")
        key = register_partition(instance, "bench", "v1")
        started = time.perf_counter()
        # The golden set's check publishes it: without it nothing can be audited.
        result = materialize(
            [*ALL_ASSETS, *SYNTHESIS_CHECKS], partition_key=key, instance=instance, resources=resources
        )
        wall = time.perf_counter() - started
        steps = {
            event.step_key: round(event.event_specific_data.duration_ms / 1000, 3)
            for event in result.all_events
            if event.event_type_value == "STEP_SUCCESS"
        }
        warehouse = Warehouse(Path(scratch) / "warehouse")
        rows = {stage: len(_read(warehouse, stage, result.run_id)) for stage in STAGES}
        report = _read(warehouse, "regression_report", result.run_id)
    return {
        "wall_s": round(wall, 2),
        "step_s": steps,
        "rows": rows,
        "means": dict(zip(report["metric"], report["candidate_mean"])),
    }


def _read(warehouse: Warehouse, stage: str, run_id: str) -> pd.DataFrame:
    """A stage's table; the audit tables are the run's own."""
    if stage in AUDIT_TABLES:
        return pd.read_parquet(warehouse.find_audit_dir("bench", "v1", run_id) / f"{stage}.parquet")
    return warehouse.read("bench", "v1", stage)


def definitions_load_seconds(repeats: int = 5) -> list[float]:
    code = "import time; t=time.perf_counter(); import rag_eval_pipeline.definitions; print(time.perf_counter()-t)"
    return [round(float(subprocess.check_output([sys.executable, "-c", code], text=True)), 3) for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--print-only", action="store_true", help="print the figures, write no results file")
    args = parser.parse_args()
    loads = definitions_load_seconds()
    figures = {
        "docs": str(args.docs),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "definitions_load_s": {"median": statistics.median(loads), "runs": loads},
        "lineage": run_lineage(args.docs),
    }
    if not args.print_only:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"lineage_{args.name}.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
