"""A metric of a team's own through the lineage and the gate, exactly like a built-in one: a candidate that
regresses on it alone is blocked; a changed metric is a new version, never compared with the old scores;
and the Python API's gate() returns the verdict the command prints."""

from __future__ import annotations

import json
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.evaluation.user_metrics import _imported, _loaded
from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process
from rag_eval_pipeline_tests.test_dagster.test_gate import _audit_table, _golden_outputs

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

METRIC = "team_gate_metrics.style:single_spaced"
METRICS = f"hit_rate,mrr,{METRIC}"
STYLE = '''
def single_spaced(item):
    """1 when the answer has no double space (a formatting rule of the team's)."""
    return 0.0 if "  " in item.answer else 1.0
'''


@pytest.fixture
def team_env(synthesized_cli_env, tmp_path, monkeypatch):
    """acme/v1 published, and a package of the team's metrics that the allow-list names, importable here (the
    gate loads metrics in its own process) and in the processes the tests start."""
    package = tmp_path / "team" / "team_gate_metrics"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "style.py").write_text(textwrap.dedent(STYLE))
    monkeypatch.syspath_prepend(str(package.parent))
    yield {
        **synthesized_cli_env,
        "PYTHONPATH": f"{package.parent}:{synthesized_cli_env['PYTHONPATH']}",
        "RAG_EVAL_CANDIDATE_MODULES": "team_gate_metrics",
    }
    for module in [name for name in sys.modules if name.startswith("team_gate_metrics")]:
        del sys.modules[module]
    _imported.cache_clear()
    _loaded.cache_clear()


def _outputs(env, path: Path, spaced: bool = False) -> str:
    """The golden answers over their gold chunks; spaced: the same words with two spaces between them."""
    records = _golden_outputs(env)
    for record in records:
        record["answer"] = ("  " if spaced else " ").join(record["answer"].split())
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def _gate(env, commit: str, outputs: str, *more: str):
    return rag_eval(
        env, "gate", "--tenant", "acme", "--candidate", commit, "--outputs", outputs, "--metrics", METRICS, *more
    )


def _verdict_lines(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("gate: ")) :]


def test_a_candidate_that_regresses_only_on_a_team_metric_is_blocked(team_env, tmp_path, monkeypatch):
    base = _gate(team_env, "base", _outputs(team_env, tmp_path / "base.jsonl"), "--branch", "main")
    assert base.returncode == 0, base.stderr

    spaced = _outputs(team_env, tmp_path / "spaced.jsonl", spaced=True)
    blocked = _gate(team_env, "spaced", spaced, "--junit", str(tmp_path / "junit.xml"))
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "gate: BLOCK" in blocked.stdout and f"regressed: {METRIC}" in blocked.stdout
    report = _audit_table(team_env, "spaced", "regression_report").set_index("metric")
    assert report.loc[METRIC, "verdict"] == "regressed"
    assert report.loc["hit_rate", "verdict"] == report.loc["mrr", "verdict"] == "ok"  # retrieval is unchanged
    outcomes = {case.get("name"): case for case in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    assert outcomes[METRIC].find("failure") is not None and outcomes["hit_rate"].find("failure") is None
    scores = _audit_table(team_env, "spaced", "metric_scores")
    judge = str(scores["judge"].iloc[0])
    assert judge.startswith(f"offline-support-v3+{METRIC}@") and set(scores["judge"]) == {judge}

    # The API's gate() on the same answers: the verdict the command printed, its exit status derived from it.
    from rag_eval_pipeline import gate

    for variable in ("DAGSTER_HOME", "RAG_EVAL_DOCUMENTS_ROOT", "RAG_EVAL_WAREHOUSE", "RAG_EVAL_CANDIDATE_MODULES"):
        monkeypatch.setenv(variable, team_env[variable])
    monkeypatch.setenv("RAG_EVAL_METRICS", METRICS)  # the run's metric set, as the command reads it too
    verdict = gate("acme", "spaced", outputs=spaced)
    assert verdict.exit_code == 1 and verdict.regressed == [METRIC]
    from_command = [line for line in _verdict_lines(blocked.stdout) if not line.startswith("report: ")]
    assert [line for line in verdict.lines() if not line.startswith("report: ")] == from_command
    assert verdict.report_path.endswith("regression_report.md") and Path(verdict.report_path).is_file()


def test_a_changed_team_metric_is_rescored_never_compared_with_the_old(team_env, tmp_path):
    outputs = _outputs(team_env, tmp_path / "base.jsonl")
    assert _gate(team_env, "base", outputs, "--branch", "main").returncode == 0
    style = Path(team_env["PYTHONPATH"].split(":")[0]) / "team_gate_metrics" / "style.py"
    style.write_text(textwrap.dedent(STYLE).replace('"  " in item.answer', '"  " in item.answer.strip()'))
    # A fresh process: the changed module is imported anew, as in the next CI job.
    again = rag_eval_process(
        team_env, "gate", "--tenant", "acme", "--candidate", "again", "--outputs", outputs, "--metrics", METRICS
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "note: re-scored with this run's judge (it was scored differently: judge: candidate" in again.stdout
    old, new = (_audit_table(team_env, commit, "metric_scores")["judge"].iloc[0] for commit in ("base", "again"))
    assert old != new and old.split("@")[0] == new.split("@")[0]  # the same metric, another version


def test_a_team_metric_the_allow_list_does_not_name_is_refused_before_any_run(team_env, tmp_path):
    env = {**team_env, "RAG_EVAL_CANDIDATE_MODULES": "someone_else"}
    refused = _gate(env, "c1", _outputs(env, tmp_path / "o.jsonl"))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: --metrics: metric '{METRIC}' is not in an allowed package (allowed: someone_else; set "
        "RAG_EVAL_CANDIDATE_MODULES)"
    ]
    assert not list(Path(env["RAG_EVAL_WAREHOUSE"]).glob("acme/v1/audits/*"))  # no audit started
    # A metric module that calls sys.exit() when imported: it made the gate exit 0, read as a pass.
    (Path(team_env["PYTHONPATH"].split(":")[0]) / "team_gate_metrics" / "exits.py").write_text(
        "import sys\nsys.exit()\n"
    )
    exits = rag_eval(
        team_env, "gate", "--tenant", "acme", "--candidate", "c2", "--metrics", "team_gate_metrics.exits:f"
    )
    assert exits.returncode == 2
    assert "cannot import metric module 'team_gate_metrics.exits': SystemExit" in exits.stderr
    assert not list(Path(env["RAG_EVAL_WAREHOUSE"]).glob("acme/v1/audits/*"))
    assert pd.read_parquet(Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1" / "golden_set.parquet").shape[0] > 0
