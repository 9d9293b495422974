"""Metadata every asset attaches so the Dagster UI shows what was materialized."""

from __future__ import annotations

import pandas as pd
from dagster import MetadataValue

PREVIEW_ROWS = 10
PREVIEW_CELL_CHARS = 80


def table_metadata(frame: pd.DataFrame, preview_columns: list[str], **extra) -> dict:
    preview = frame[preview_columns].head(PREVIEW_ROWS).copy()
    for column in preview.columns:
        preview[column] = preview[column].map(_short)
    return {
        "dagster/row_count": len(frame),
        "preview": MetadataValue.md(preview.to_markdown(index=False) if len(preview) else "_empty_"),
        **extra,
    }


def _short(value) -> str:
    text = str(list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value)
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"
