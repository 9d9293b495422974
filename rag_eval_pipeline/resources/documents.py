"""Where each tenant's documents are: one folder per tenant under a root."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from rag_eval_pipeline.core.names import PartitionNameError, validate_name
from rag_eval_pipeline.ingest.parsing import tenant_folder_problem


class DocumentsResource(ConfigurableResource):
    root: str

    def folder_for(self, tenant: str) -> Path:
        folder = Path(self.root) / validate_name("tenant", tenant)
        problem = tenant_folder_problem(folder)
        if problem:
            raise ValueError(f"tenant folder {folder} is {problem}")
        if not folder.is_dir():
            raise PartitionNameError(f"unknown tenant {tenant!r}: no document folder at {folder}")
        return folder
