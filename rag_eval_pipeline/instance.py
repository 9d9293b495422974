"""The Dagster instance the CLI uses: the repo's dagster.yaml under a git-ignored DAGSTER_HOME."""

from __future__ import annotations

import os
import shutil

from dagster import DagsterInstance

from rag_eval_pipeline import settings


def local_instance() -> DagsterInstance:
    """`$DAGSTER_HOME` if set (any dagster.yaml there is kept), else `.dagster_home/` with the repo's config."""
    home = settings.dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    repo_config = settings.PROJECT_ROOT / "dagster.yaml"
    if not config.exists() and repo_config.exists():
        shutil.copyfile(repo_config, config)
    os.environ["DAGSTER_HOME"] = str(home)
    return DagsterInstance.get()
