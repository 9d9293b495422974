"""The CLI's error policy at its edges: short help flags, `python -m`, and errors that are not bad input."""

import sqlite3
import subprocess
import sys

import click
import pytest

from rag_eval_pipeline import cli
from rag_eval_pipeline.cli import errors

pytestmark = [pytest.mark.cli]


def test_short_and_long_help_flags_and_python_m_work():
    assert cli.main(["-h"]) == 0 and cli.main(["gate", "-h"]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "rag_eval_pipeline.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "gate" in done.stdout


def _failing_command(exception: Exception) -> click.Command:
    @click.command()
    def command() -> None:
        raise exception

    return command


def test_an_unusable_sqlite_file_is_one_line_exit_2(capsys):
    status = errors.run(_failing_command(sqlite3.DatabaseError("file is not a database")), [])
    err = capsys.readouterr().err
    assert status == errors.EXIT_ERROR and err == "error: file is not a database\n"


def test_a_bug_keeps_its_trace_but_exits_2_never_1_which_a_gate_reads_as_a_regression(capsys):
    status = errors.run(_failing_command(KeyError("missing")), [])
    err = capsys.readouterr().err
    assert status == errors.EXIT_ERROR != errors.EXIT_BLOCKED
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: internal error KeyError")


def test_an_unwritable_output_is_refused_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    status = cli.main(["synthesize", "--docs", str(tmp_path / "no-such-docs"), "--out", str(blocker / "golden.jsonl")])
    assert status == errors.EXIT_ERROR and "is not a folder" in capsys.readouterr().err


def test_a_package_of_the_production_extra_missing_is_one_line_not_a_bug(capsys):
    @click.command()
    def needs_alembic():
        raise ModuleNotFoundError("No module named 'alembic'", name="alembic")

    @click.command()
    def needs_something_else():
        raise ModuleNotFoundError("No module named 'nonexistent'", name="nonexistent")

    assert errors.run(needs_alembic, []) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "pip install 'rag_eval_pipeline[production]'" in error
    assert errors.run(needs_something_else, []) == 2
    assert "internal error" in capsys.readouterr().err  # any other missing module is still a bug
