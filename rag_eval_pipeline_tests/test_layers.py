"""The layers: only the Dagster layer imports dagster; everything else runs without it.

The modules are found by walking the package, so a new core module is covered without editing this test.
"""

import json
import subprocess
import sys
from pathlib import Path

import rag_eval_pipeline

PACKAGE_DIR = Path(rag_eval_pipeline.__file__).resolve().parent
# The Dagster layer: the files that define assets, checks, jobs, sensors, schedules, partitions,
# resources, run config and the code location, the instance helper, and the command line (which runs jobs).
# Named one by one: a new module is in the core (and tested) unless it is added here on purpose.
DAGSTER_PATHS = {
    "definitions.py",
    "partitions.py",
    "metadata.py",
    "instance.py",
    "ingest/assets.py",
    "ingest/definitions.py",
    "synthesis/assets.py",
    "synthesis/checks.py",
    "synthesis/records.py",
    "synthesis/definitions.py",
    "evaluation/assets.py",
    "evaluation/definitions.py",
    "reporting/assets.py",
    "reporting/checks.py",
    "reporting/definitions.py",
    "automation/jobs.py",
    "automation/run_config.py",
    "automation/schedules.py",
    "automation/sensors.py",
    "automation/submission.py",
    "automation/run_health.py",
}
DAGSTER_PACKAGES = {"resources", "cli"}

# Imports the modules named on the command line, then prints whether dagster was imported.
PROBE = (
    "import importlib, json, sys\n"
    "for name in sys.argv[1:]:\n"
    "    importlib.import_module(name)\n"
    "print(json.dumps('dagster' in sys.modules))\n"
)


def _is_dagster_layer(relative: Path) -> bool:
    parts = relative.parts
    return relative.as_posix() in DAGSTER_PATHS or (len(parts) > 1 and parts[0] in DAGSTER_PACKAGES)


def core_modules() -> list[str]:
    """Every module of the package outside the Dagster layer, by dotted name."""
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if _is_dagster_layer(relative):
            continue
        parts = relative.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(["rag_eval_pipeline", *parts]))
    return names


def _imports_dagster(modules: list[str]) -> bool:
    completed = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, f"importing {modules} failed:\n{completed.stderr}"
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_the_walk_finds_the_core_and_leaves_out_the_dagster_layer():
    modules = core_modules()
    assert {
        "rag_eval_pipeline.stores.local",
        "rag_eval_pipeline.stores.database.results",
        "rag_eval_pipeline.synthesis.pipeline",
        "rag_eval_pipeline.automation.inbox",
        "rag_eval_pipeline.reporting.baselines",
    } <= set(modules)
    for layer in (
        "rag_eval_pipeline.definitions",
        "rag_eval_pipeline.synthesis.assets",
        "rag_eval_pipeline.automation.jobs",
        "rag_eval_pipeline.resources.warehouse",
        "rag_eval_pipeline.partitions",
        "rag_eval_pipeline.synthesis.records",
    ):
        assert layer not in modules


def test_no_module_outside_the_dagster_layer_imports_dagster():
    modules = core_modules()
    if not _imports_dagster(modules):
        return
    # Only on failure, one fresh interpreter per module: name the ones that pull dagster in.
    culprits = [name for name in modules if _imports_dagster([name])]
    raise AssertionError(f"these modules import dagster, directly or through their imports: {culprits}")
