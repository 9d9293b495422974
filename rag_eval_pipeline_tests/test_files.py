"""Write then rename: a failed write leaves the old file and no partial one."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval_pipeline.core.files import atomic_copy, atomic_write_parquet, atomic_write_text, write_atomically


def test_text_parquet_and_copies_land_whole(tmp_path):
    text = atomic_write_text(tmp_path / "a" / "b.txt", "héllo\n")  # the missing folders are made
    table = atomic_write_parquet(tmp_path / "t.parquet", pd.DataFrame({"x": [1, 2]}))
    copy = atomic_copy(table, tmp_path / "copy" / "t.parquet")

    assert text.read_text(encoding="utf-8") == "héllo\n"
    assert pd.read_parquet(copy)["x"].tolist() == [1, 2]
    assert not list(tmp_path.rglob("*.partial"))


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial(tmp_path):
    path = atomic_write_text(tmp_path / "report.md", "old")

    def half_then_fail(partial):
        partial.write_text("half", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, half_then_fail)

    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def _create(path, text, start) -> bool:
    from rag_eval_pipeline.core.files import create_text_once

    start.wait(timeout=60)
    return create_text_once(path, text)


def test_of_processes_creating_one_file_at_once_one_wins_and_its_text_is_whole(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    path, texts = tmp_path / "manifest.json", [f"writer {n}\n" * 1000 for n in range(6)]
    with context.Manager() as manager:
        start = manager.Barrier(len(texts))
        with context.Pool(len(texts)) as pool:
            created = pool.starmap(_create, [(path, text, start) for text in texts])

    assert created.count(True) == 1
    assert path.read_text(encoding="utf-8") == texts[created.index(True)]
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no partial file left
