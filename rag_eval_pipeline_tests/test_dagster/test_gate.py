"""`rag-eval gate` as CI runs it: exit 0 on pass, 1 on a regression, 2 on an error, and JUnit XML.

The first test runs the console script in subprocesses, as CI does, and so do the tests that read all of
stderr (one line, no stack trace); the rest call it in this process (see support/cli.py), which decides
the same and spares each call a fresh interpreter.
"""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline_tests.support.cli import rag_eval, rag_eval_process

pytestmark = [pytest.mark.dagster, pytest.mark.cli]

DEGRADED = "rag_eval_pipeline_tests.candidates:no_retrieval"


@pytest.fixture
def env(cli_env):
    return cli_env


@pytest.fixture
def synthesized(synthesized_cli_env):
    """acme/v1 registered, synthesized and published: a copy of the session's (test_cli.py synthesizes itself)."""
    return synthesized_cli_env


def _junit(path: Path) -> dict[str, str]:
    """Each metric's outcome in the JUnit file: passed, failure or skipped."""
    suite = ET.parse(path).getroot()
    return {case.get("name"): (case[0].tag if len(case) else "passed") for case in suite.iter("testcase")}


def test_first_run_becomes_the_baseline_then_a_regression_exits_1(synthesized, tmp_path):
    first = rag_eval_process(
        synthesized,
        "gate",
        "--tenant",
        "acme",
        "--candidate",
        "base",
        "--branch",
        "main",
        "--junit",
        str(tmp_path / "first.xml"),
    )
    assert first.returncode == 0, first.stderr
    assert "NO BASELINE YET" in first.stdout and "acme/v1" in first.stdout
    assert set(_junit(tmp_path / "first.xml").values()) == {"skipped"}

    same = rag_eval_process(
        synthesized, "gate", "--tenant", "acme", "--candidate", "same", "--junit", str(tmp_path / "same.xml")
    )
    assert same.returncode == 0, same.stderr
    assert "gate: PASS" in same.stdout
    assert set(_junit(tmp_path / "same.xml").values()) == {"passed"}

    worse = rag_eval_process(
        synthesized,
        "gate",
        "--tenant",
        "acme",
        "--candidate",
        "bad",
        "--entry",
        DEGRADED,
        "--junit",
        str(tmp_path / "worse.xml"),
    )
    assert worse.returncode == 1, worse.stderr
    assert "gate: BLOCK" in worse.stdout and "hit_rate" in worse.stdout
    assert "regression_report.md" in worse.stdout
    outcomes = _junit(tmp_path / "worse.xml")
    assert outcomes["hit_rate"] == "failure" and outcomes["faithfulness"] == "failure"


def test_the_tolerance_reaches_the_verdict(synthesized, tmp_path):
    assert rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main").returncode == 0
    # A drop of at most 1 is tolerated: the means no longer block. The degraded candidate retrieves nothing, so
    # contextual relevancy has nothing to judge (not applicable: its retrieval is measured by hit rate).
    loose = rag_eval(
        synthesized,
        "gate",
        "--tenant",
        "acme",
        "--candidate",
        "bad",
        "--entry",
        DEGRADED,
        "--tolerance",
        "1.0",
        "--junit",
        str(tmp_path / "loose.xml"),
    )
    assert loose.returncode == 0, loose.stderr
    outcomes = _junit(tmp_path / "loose.xml")
    assert outcomes["hit_rate"] == "passed" and outcomes["faithfulness"] == "passed"
    assert outcomes["contextual_relevancy"] == "skipped"
    strict = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "bad-again", "--entry", DEGRADED)
    assert strict.returncode == 1 and "regressed: " in strict.stdout and "hit_rate" in strict.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--tenant", "ghost", "--candidate", "c1"), "no published golden set"),
        (
            ("--tenant", "acme", "--candidate", "c1", "--entry", "no_such_module:answer"),
            "cannot import candidate module",
        ),
        (("--tenant", "acme", "--candidate", "c1", "--version", "v9"), "unknown dataset version"),
        (("--tenant", "acme", "--candidate", "c1", "--baseline", "ffff000"), "'ffff000' was never audited on acme/v1"),
    ],
)
def test_errors_exit_2_with_a_message(synthesized, args, message):
    completed = rag_eval(synthesized, "gate", *args)
    assert completed.returncode == 2
    assert message in completed.stderr


def test_a_pass_on_main_promotes_and_baseline_commands_show_and_promote(synthesized):
    assert rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main").returncode == 0
    worse = rag_eval(
        synthesized, "gate", "--tenant", "acme", "--candidate", "bad", "--entry", DEGRADED, "--branch", "main"
    )
    assert worse.returncode == 1 and "baseline: base" in worse.stdout and "now the baseline" not in worse.stdout
    pull_request = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "pr", "--branch", "feature-x")
    assert pull_request.returncode == 0 and "now the baseline" not in pull_request.stdout
    merged = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "merged", "--branch", "main")
    assert merged.returncode == 0
    assert "merged is now the baseline: passed the gate on main" in merged.stdout

    # Against the degraded commit, asked for by name, the reference candidate passes and nothing is promoted
    # (contextual relevancy applied to none of the degraded commit's items: it has nothing to compare with).
    against_bad = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "fix", "--baseline", "bad")
    assert against_bad.returncode == 0 and "baseline: bad" in against_bad.stdout

    shown = rag_eval(synthesized, "baseline", "show", "--tenant", "acme")
    assert shown.returncode == 0
    lines = [line for line in shown.stdout.splitlines() if " v1 " in line]
    assert [line.split()[2] for line in lines] == ["base", "merged"]
    assert "audited on v1: bad, base, fix, merged, pr" in shown.stdout

    assert rag_eval(synthesized, "baseline", "promote", "--tenant", "acme", "--commit", "pr").returncode == 0
    after = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "next")
    assert "baseline: pr" in after.stdout
    refused = rag_eval(synthesized, "baseline", "promote", "--tenant", "acme", "--commit", "ghost")
    assert refused.returncode == 2 and "'ghost' was never audited" in refused.stderr


def _rejudge_archive(env, commit: str, judge: str) -> None:
    """Make a commit's archived scores look as if an older judge version had scored them."""
    (path,) = Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit={commit}/run=*/metric_scores.parquet")
    scores = pd.read_parquet(path)
    scores["judge"] = judge
    scores.to_parquet(path)


def test_a_baseline_scored_by_another_judge_is_rescored_or_refused(synthesized):
    assert rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "base", "--branch", "main").returncode == 0
    _rejudge_archive(synthesized, "base", "offline-support-v1")

    refused = rag_eval(
        synthesized, "gate", "--tenant", "acme", "--candidate", "next", "--branch", "main", "--no-rescore-baseline"
    )
    assert refused.returncode == 2, refused.stdout
    last_line = refused.stderr.strip().splitlines()[-2]  # the step's error, above "run ... failed after"
    assert "scored differently (judge: candidate offline-support-v3, baseline offline-support-v1)" in last_line

    # By default the baseline's archived outputs are scored again with the current judge: same answers, a pass.
    rescored = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "next", "--branch", "main")
    assert rescored.returncode == 0, rescored.stderr
    assert "gate: PASS" in rescored.stdout and "note: re-scored with this run's judge" in rescored.stdout
    degraded = rag_eval(
        synthesized, "gate", "--tenant", "acme", "--candidate", "bad", "--entry", DEGRADED, "--baseline", "base"
    )
    assert degraded.returncode == 1 and "re-scored" in degraded.stdout  # a re-scored baseline still blocks


def test_a_bad_commit_is_refused_before_any_work(synthesized):
    completed = rag_eval(synthesized, "gate", "--tenant", "acme", "--candidate", "x" * 300)
    assert completed.returncode == 2
    assert "invalid commit" in completed.stderr and "300 characters" in completed.stderr
    assert not (Path(synthesized["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1" / "audits").exists()  # nothing was audited


def test_a_golden_set_that_fails_its_check_is_never_gated_on(env, tenant_dirs):
    """A one-file tenant whose golden set misses a planned question type: blocked, so never published."""
    solo = tenant_dirs[0] / "solo"
    solo.mkdir()
    (solo / "contract.pdf").write_bytes((tenant_dirs[0] / "acme" / "customer-sla-contract-summary.pdf").read_bytes())
    assert rag_eval(env, "register", "--tenant", "solo", "--version", "v1").returncode == 0
    synthesis = rag_eval_process(env, "run", "--tenant", "solo", "--version", "v1", "--job", "synthesis")
    assert synthesis.returncode == 1 and "blocked by golden_set_expectations" in synthesis.stderr
    assert "Stack Trace" not in synthesis.stderr  # Dagster's own failure lines stay in the run's log

    latest = rag_eval(env, "gate", "--tenant", "solo", "--candidate", "c1")
    assert latest.returncode == 2 and "no published golden set" in latest.stderr
    named = rag_eval(env, "gate", "--tenant", "solo", "--candidate", "c1", "--version", "v1")
    assert named.returncode == 2 and "solo/v1 is not published" in named.stderr
    shown = rag_eval(env, "baseline", "show", "--tenant", "solo")
    assert "has no baseline yet" in shown.stdout  # nothing was recorded


# --- an outputs file: read as given, bad records fail their item, an unusable file is bad input ---------


def _golden_outputs(env) -> list[dict]:
    """acme/v1's golden items answered by their ground truth over their gold chunks: a candidate that scores.
    At most 30 words: the offline judge abstains on the faithfulness of longer answers."""
    tables = Path(env["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1"
    chunks = pd.read_parquet(tables / "document_chunks.parquet").set_index("chunk_id")["text"]
    golden = pd.read_parquet(tables / "golden_set.parquet")
    return [
        {
            "qa_id": item.qa_id,
            "answer": " ".join(item.ground_truth.split()[:30]),
            "contexts": [{"id": chunk, "text": chunks[chunk]} for chunk in item.gold_chunk_ids],
        }
        for item in golden.itertuples()
    ]


def _audit_table(env, commit: str, name: str) -> pd.DataFrame:
    (path,) = Path(env["RAG_EVAL_WAREHOUSE"]).glob(f"acme/v1/audits/commit={commit}/run=*/{name}.parquet")
    return pd.read_parquet(path)


def test_a_lone_surrogate_is_scored_and_an_over_long_field_fails_only_its_item(synthesized, tmp_path):
    records = _golden_outputs(synthesized)
    surrogate, huge, echo = records[0], records[1], records[2]
    surrogate["answer"] += " \ud800"  # json.dumps writes the escape "\\ud800", which json.loads reads back alone
    surrogate["contexts"][0]["text"] += " \udfff"
    huge["answer"] = "Refunds are processed quickly. " * 33_000  # about 1 MB: near two minutes of scoring
    echo["question"] = "Which one? " * 2_000
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="ascii")

    completed = rag_eval(
        synthesized, "gate", "--tenant", "acme", "--candidate", "odd", "--outputs", str(outputs), "--branch", "main"
    )

    assert completed.returncode == 0, completed.stderr  # the first audit: no baseline yet
    assert "NO BASELINE YET" in completed.stdout
    answers = _audit_table(synthesized, "odd", "candidate_outputs").set_index("qa_id")
    assert answers.loc[surrogate["qa_id"], "status"] == "ok"
    assert answers.loc[surrogate["qa_id"], "answer"].endswith(" \ufffd")
    for item, field in ((huge, "answer"), (echo, "question")):
        assert answers.loc[item["qa_id"], "status"] == "failed"
        assert (
            f"{field} is" in answers.loc[item["qa_id"], "error"]
            and "over the limit of 20,000" in answers.loc[item["qa_id"], "error"]
        )
    assert (answers["status"] == "ok").sum() == len(records) - 2
    scores = _audit_table(synthesized, "odd", "metric_scores").set_index(["qa_id", "metric"])
    assert scores.loc[(surrogate["qa_id"], "faithfulness"), "status"] == "ok"  # scored, not lost
    assert scores.loc[(surrogate["qa_id"], "contextual_relevancy"), "status"] == "ok"


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "holds no records"),
        (["", "   "], "holds no records"),
        (
            [json.dumps({"qa_id": "x", "answer": 3}), json.dumps({"answer": "which question?"})],
            "no usable record: line 1",
        ),
    ],
)
def test_an_outputs_file_without_a_usable_record_exits_2_before_any_run(synthesized, tmp_path, lines, message):
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(line + "\n" for line in lines))

    completed = rag_eval_process(
        synthesized, "gate", "--tenant", "acme", "--candidate", "empty", "--outputs", str(outputs)
    )

    assert completed.returncode == 2, completed.stdout
    assert completed.stderr.strip().splitlines() == [completed.stderr.strip()]  # one line
    assert completed.stderr.startswith(f"error: candidate outputs file {outputs} ") and message in completed.stderr
    assert not (Path(synthesized["RAG_EVAL_WAREHOUSE"]) / "acme" / "v1" / "audits").exists()  # nothing was run
