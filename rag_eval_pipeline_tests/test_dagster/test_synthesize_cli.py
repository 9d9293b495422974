"""`rag-eval synthesize`: a folder of documents to a verified golden set file, no tenant and no Dagster run.

Called in-process through `cli.main`, with the warehouse (where the CLI caches embeddings) in a temporary folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.cli import main
from rag_eval_pipeline.synthesis.items import GOLDEN_COLUMNS, QUESTION_TYPES, REJECTED_COLUMNS, SIMPLE

pytestmark = [pytest.mark.cli]

DEMO_FILES = ("data-retention-policy.md", "expense-and-travel-policy.md", "oncall-handbook.txt")


@pytest.fixture(scope="module")
def docs(demo_folder, tmp_path_factory) -> Path:
    """Three of the demo documents: enough for every offline type, quick to embed."""
    folder = tmp_path_factory.mktemp("docs")
    for name in DEMO_FILES:
        shutil.copy(demo_folder / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def warehouse_root(tmp_path_factory) -> Path:
    """One warehouse for the module, so later runs find the documents' embeddings in its cache."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(autouse=True)
def warehouse(warehouse_root, monkeypatch) -> Path:
    root = warehouse_root
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(root))
    for variable in ("RAG_EVAL_JUDGE_BASE_URL", "RAG_EVAL_JUDGE_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    return root


def _synthesize(docs: Path, out: Path, *extra: str) -> int:
    return main(["synthesize", "--docs", str(docs), "--out", str(out), "--n", "12", *extra])


def _read(path: Path) -> pd.DataFrame:
    return pd.read_json(path, lines=True) if path.suffix == ".jsonl" else pd.read_parquet(path)


def test_writes_a_jsonl_golden_set_and_its_rejected_items_beside_it(docs, tmp_path, warehouse, capsys):
    out = tmp_path / "sets" / "golden.jsonl"  # the folder does not exist yet

    status = _synthesize(docs, out)

    captured = capsys.readouterr()
    assert status == 0, captured.err
    golden = _read(out)
    assert list(golden.columns) == GOLDEN_COLUMNS
    assert len(golden) > 0 and golden["qa_id"].is_unique
    assert set(golden["question_type"]) <= set(QUESTION_TYPES) and golden["grounded"].all()
    rejected_path = tmp_path / "sets" / "golden.rejected.jsonl"
    assert rejected_path.is_file()
    if rejected_path.stat().st_size:
        rejected = _read(rejected_path)
        assert list(rejected.columns) == REJECTED_COLUMNS and rejected["reason"].str.len().gt(0).all()
    # The plan and the summary go to stdout; the embeddings were cached in the warehouse it was pointed at.
    assert "| question_type" in captured.out and "reasoning" in captured.out
    assert f"{len(golden)} verified items from" in captured.out and str(out) in captured.out
    assert (warehouse / "embedding_cache.sqlite").is_file()


def test_writes_parquet_with_the_same_items_as_jsonl(docs, tmp_path):
    assert _synthesize(docs, tmp_path / "golden.jsonl") == 0
    assert _synthesize(docs, tmp_path / "golden.parquet") == 0

    golden = _read(tmp_path / "golden.parquet")
    rejected = _read(tmp_path / "golden.rejected.parquet")
    assert list(golden.columns) == GOLDEN_COLUMNS
    assert list(rejected.columns) == REJECTED_COLUMNS
    assert golden["qa_id"].tolist() == _read(tmp_path / "golden.jsonl")["qa_id"].tolist()
    assert all(list(ids) for ids, t in zip(golden["gold_chunk_ids"], golden["question_type"]) if t != "unanswerable")


def test_types_restrict_the_set_to_the_named_types(docs, tmp_path, capsys):
    out = tmp_path / "simple.jsonl"

    assert _synthesize(docs, out, "--types", "simple") == 0

    golden = _read(out)
    assert len(golden) > 0
    assert set(golden["question_type"]) == {SIMPLE}
    assert "multi_context" not in capsys.readouterr().out  # the plan names only the asked-for type


def test_a_folder_that_yields_nothing_exits_1_with_the_plans_reasons(tmp_path, capsys):
    docs = tmp_path / "thin"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nShort note. Nothing else.\n", encoding="utf-8")
    out = tmp_path / "golden.jsonl"

    status = _synthesize(docs, out)

    captured = capsys.readouterr()
    assert status == 1
    assert "only 0 candidate tasks in this corpus" in captured.out
    assert "0 verified items" in captured.out
    assert out.is_file()


@pytest.mark.parametrize(
    "out_name, args, message",
    [
        ("golden.csv", [], "--out must end in .jsonl or .parquet, got golden.csv"),
        ("golden.jsonl", ["--types", "simple,trivia"], "unknown question type 'trivia'"),
        ("golden.jsonl", ["--types", "simple=many"], "the weight of 'simple' must be a number"),
        ("golden.jsonl", ["--n", "0"], "the number of items must be at least 1"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(docs, tmp_path, capsys, out_name, args, message):
    status = main(["synthesize", "--docs", str(docs), "--out", str(tmp_path / out_name), *args])

    captured = capsys.readouterr()
    assert status == 2
    assert message in captured.err and "Traceback" not in captured.err
    assert not list(tmp_path.glob("golden*"))


def test_an_empty_folder_exits_2_naming_the_folder(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()

    status = _synthesize(empty, tmp_path / "golden.jsonl")

    err = capsys.readouterr().err
    assert status == 2
    assert "no readable document" in err and str(empty) in err
    assert not (tmp_path / "golden.jsonl").exists()


def test_a_missing_folder_exits_2(tmp_path, capsys):
    assert _synthesize(tmp_path / "nowhere", tmp_path / "golden.jsonl") == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_llm_generator_without_a_server_exits_2_with_a_clear_message(docs, tmp_path, capsys):
    status = _synthesize(docs, tmp_path / "golden.jsonl", "--generator", "llm")

    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("error: ") and "base URL" in err and "model" in err
    assert "Traceback" not in err
    assert not (tmp_path / "golden.jsonl").exists()
