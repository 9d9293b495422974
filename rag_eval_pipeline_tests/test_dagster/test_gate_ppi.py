"""`rag-eval gate --decide-on ppi` as CI runs it: refused in one line without labels; with a calibration by
this very judge, the report shows it next to each metric and decides on the PPI intervals; a calibration
by another judge identity (another metric set) does not count."""

import json

import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

CONTEXT = "The Halden depot opened in 2019 and employs 42 drivers."


def _labels_file(path, count: int = 12):
    """Faithfulness labels of our own: supported answers labelled 1, answers with a wrong number labelled 0."""
    rows = []
    for i in range(count):
        good = i % 2 == 0
        answer = "The Halden depot employs 42 drivers." if good else f"The Halden depot employs {50 + i} drivers."
        rows.append(
            {
                "id": f"l{i}",
                "user_input": f"How many drivers work at the Halden depot? ({i})",
                "retrieved_contexts": [CONTEXT],
                "response": answer,
                "reference": "42 drivers.",
                "faithfulness_label": 1 if good else 0,
            }
        )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_without_labels_the_gate_refuses_in_one_line_before_any_run(synthesized_cli_env):
    result = rag_eval(synthesized_cli_env, "gate", "--tenant", "acme", "--candidate", "c1", "--decide-on", "ppi")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "has none" in result.stderr and "calibrate" in result.stderr
    assert "run " not in result.stdout  # no audit was run


def test_with_a_calibration_by_this_judge_the_gate_decides_on_ppi(synthesized_cli_env, tmp_path):
    env = synthesized_cli_env
    base = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main")
    assert base.returncode == 0, base.stderr
    assert "uncalibrated" in base.stdout  # nothing calibrated yet: said in plain words

    labels = _labels_file(tmp_path / "labels.jsonl")
    other = rag_eval(env, "calibrate", "--tenant", "acme", "--labels", str(labels), "--metrics", "faithfulness")
    assert other.returncode == 0, other.stderr
    refused = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "c1", "--decide-on", "ppi")
    assert refused.returncode == 2  # labels exist, but no calibration by the gate's judge identity
    assert "at least 10 labelled items scored by judge" in refused.stderr

    calibrated = rag_eval(env, "calibrate", "--tenant", "acme")  # the stored labels, the gate's metric set
    assert calibrated.returncode == 0, calibrated.stderr
    gated = rag_eval(env, "gate", "--tenant", "acme", "--candidate", "c2", "--decide-on", "ppi")
    assert gated.returncode == 0, gated.stderr  # the same answers: the same labels correct both sides
    assert "the gate decides on PPI intervals where a metric has labels" in gated.stdout
    faithfulness = next(line for line in gated.stdout.splitlines() if line.startswith("| faithfulness | calibrated"))
    assert "kappa" in faithfulness and "PPI on 12 labels" in faithfulness and "1.000 [0.854, 1.000]" in faithfulness
    assert faithfulness.endswith("| PPI interval |")  # this metric's verdict came from its interval
    relevance = next(line for line in gated.stdout.splitlines() if line.startswith("| answer_relevance | uncal"))
    assert relevance.endswith("| judge's scores |")  # no labels: decided on the judge, and said so
