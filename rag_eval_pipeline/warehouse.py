"""Parquet tables on disk, one folder per (tenant, dataset_version)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rag_eval_pipeline.partitions import validate_name


class Warehouse:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def tenant_dir(self, tenant: str) -> Path:
        return self.root / validate_name("tenant", tenant)

    def partition_dir(self, tenant: str, dataset_version: str) -> Path:
        return self.tenant_dir(tenant) / validate_name("dataset version", dataset_version)

    def table_path(self, tenant: str, dataset_version: str, name: str) -> Path:
        return self.partition_dir(tenant, dataset_version) / f"{name}.parquet"

    def write(self, tenant: str, dataset_version: str, name: str, frame: pd.DataFrame) -> Path:
        path = self.table_path(tenant, dataset_version, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash never leaves a half-written table behind.
        partial = path.with_suffix(".parquet.partial")
        frame.to_parquet(partial, index=False)
        partial.replace(path)
        return path

    def read(self, tenant: str, dataset_version: str, name: str) -> pd.DataFrame:
        path = self.table_path(tenant, dataset_version, name)
        if not path.is_file():
            raise FileNotFoundError(
                f"no {name!r} table for tenant {tenant!r}, dataset version {dataset_version!r} at {path}: "
                "materialize it first"
            )
        return pd.read_parquet(path)

    def exists(self, tenant: str, dataset_version: str, name: str) -> bool:
        return self.table_path(tenant, dataset_version, name).is_file()

    def write_text(self, tenant: str, dataset_version: str, filename: str, text: str) -> Path:
        path = self.partition_dir(tenant, dataset_version) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path
