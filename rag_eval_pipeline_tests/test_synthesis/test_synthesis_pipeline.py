"""The synthesis path end to end (test nodes -> plan -> generation -> verification), on good and on bad input.

Bad input gives fewer items with reasons, or a clear error: never a crash or a silent empty set.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_pipeline.ingest.chunking import chunk_document
from rag_eval_pipeline.ingest.parsing import read_documents
from rag_eval_pipeline.synthesis import pipeline
from rag_eval_pipeline.synthesis.items import (
    GOLDEN_COLUMNS,
    MULTI_CONTEXT,
    REASONING,
    REFUSAL,
    REJECTED_COLUMNS,
    SIMPLE,
    UNANSWERABLE,
    GenerationTask,
    QAItem,
    make_item,
)
from rag_eval_pipeline.synthesis.offline_generation import OfflineGenerator
from rag_eval_pipeline.synthesis.pipeline import GENERATION_PLAN_COLUMNS, PLAN_COLUMNS, parse_mix

STAGES = {"generation", "form", "quality", "gold_ids", "leak", "grounding", "answerable", "duplicate", "retrieval"}


def _offline(chunks: pd.DataFrame) -> OfflineGenerator:
    return OfflineGenerator(chunks["text"].tolist())


def _run(folder: Path, judge, embedder, n: int = 12, mix=None, make_generator=_offline) -> pipeline.FolderSynthesis:
    return pipeline.from_folder(folder, make_generator, judge, embedder, n, mix)


def _write(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content, encoding="utf-8")
    return folder


def _assert_consistent(result: pipeline.FolderSynthesis) -> None:
    """The tables agree with each other, and every planned item that is missing is explained."""
    golden, rejected, plan = result.golden, result.rejected, result.plan
    assert list(golden.columns) == GOLDEN_COLUMNS
    assert list(rejected.columns) == REJECTED_COLUMNS
    assert list(plan.columns) == PLAN_COLUMNS
    assert set(rejected["stage"]) <= STAGES
    assert rejected["reason"].map(lambda r: isinstance(r, str) and r != "").all()
    kept = golden["question_type"].value_counts()
    assert plan.set_index("question_type")["kept"].to_dict() == {t: int(kept.get(t, 0)) for t in plan["question_type"]}
    # Nothing lost: every generated item is either kept or rejected after generation.
    assert plan["generated"].sum() == len(golden) + (rejected["stage"] != "generation").sum()
    for row in plan.itertuples():
        if row.generated < row.planned:
            assert row.note, f"{row.question_type}: {row.generated} of {row.planned} written, no note"
        if row.kept < row.generated:
            assert (rejected["question_type"] == row.question_type).any()


# --- the demo corpus --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_chunks(demo_folder) -> pd.DataFrame:
    return pd.DataFrame([asdict(c) for d in read_documents(demo_folder).documents for c in chunk_document(d)])


@pytest.fixture(scope="module")
def demo_result(demo_folder, offline_judge, embedder) -> pipeline.FolderSynthesis:
    return _run(demo_folder, offline_judge, embedder, n=30)


def test_demo_set_has_every_type_the_offline_generator_writes(demo_result):
    types = set(demo_result.golden["question_type"])

    assert {SIMPLE, MULTI_CONTEXT, UNANSWERABLE} <= types
    assert REASONING not in types
    plan = demo_result.plan.set_index("question_type")
    assert plan.loc[REASONING, "planned"] == 0 and "cannot write" in plan.loc[REASONING, "note"]
    assert plan["planned"].sum() == 30
    _assert_consistent(demo_result)


def test_demo_gold_chunks_exist_and_their_contexts_are_their_texts(demo_result, demo_chunks):
    texts = dict(zip(demo_chunks["chunk_id"], demo_chunks["text"]))
    assert demo_result.n_chunks == len(demo_chunks)

    for item in demo_result.golden.to_dict("records"):
        gold = list(item["gold_chunk_ids"])
        if item["question_type"] == UNANSWERABLE:
            assert gold == [] and item["ground_truth"] == REFUSAL and item["round_trip_rank"] == -1
            continue
        assert gold and all(c in texts for c in gold)
        assert list(item["gold_contexts"]) == [texts[c] for c in gold]
        assert set(gold) <= set(item["source_chunk_ids"])
        assert item["round_trip_rank"] >= 0
        if item["question_type"] == MULTI_CONTEXT:
            assert len(gold) == 2 and gold[0] != gold[1]


def test_every_kept_demo_item_is_grounded_in_its_gold_chunks(demo_result, offline_judge):
    assert demo_result.golden["grounded"].all()
    for item in demo_result.golden.to_dict("records"):
        if item["question_type"] == UNANSWERABLE:
            continue
        statements = offline_judge.statements(item["ground_truth"])
        assert statements
        verdicts = offline_judge.verify(statements, list(item["gold_contexts"]), item["question"])
        assert all(v.supported for v in verdicts), (
            item["question"],
            [v.statement for v in verdicts if not v.supported],
        )


def test_demo_qa_ids_are_unique_and_stable_across_runs(demo_result, demo_folder, offline_judge, embedder):
    again = _run(demo_folder, offline_judge, embedder, n=30)

    assert demo_result.golden["qa_id"].is_unique
    assert again.golden["qa_id"].tolist() == demo_result.golden["qa_id"].tolist()
    assert again.golden["question"].tolist() == demo_result.golden["question"].tolist()


def test_demo_items_come_from_many_documents(demo_result, demo_chunks):
    doc_of = dict(zip(demo_chunks["chunk_id"], demo_chunks["doc_id"]))
    documents = {doc_of[c] for ids in demo_result.golden["source_chunk_ids"] for c in ids}

    # Test nodes cover every cluster and then every document before any cluster is drawn on twice.
    assert len(documents) >= 5, documents


# --- bad folders ------------------------------------------------------------------------------------


def test_an_empty_folder_is_a_clear_error(tmp_path, offline_judge, embedder):
    folder = _write(tmp_path / "empty", {})

    with pytest.raises(ValueError, match="no readable document") as error:
        _run(folder, offline_judge, embedder)

    assert str(folder) in str(error.value) and "holds no files" in str(error.value)


def test_a_missing_folder_is_a_clear_error(tmp_path, offline_judge, embedder):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        _run(tmp_path / "nowhere", offline_judge, embedder)


def test_a_folder_of_unparseable_files_names_each_with_its_reason(tmp_path, offline_judge, embedder):
    folder = _write(
        tmp_path / "broken",
        {
            "contract.pdf": b"%PDF-1.7 this is not really a PDF \x00\x01\x02",
            "minutes.docx": b"PK\x03\x04 a word document",
            "empty.md": b"   \n",
        },
    )

    with pytest.raises(ValueError) as error:
        _run(folder, offline_judge, embedder)

    message = str(error.value)
    assert str(folder) in message
    assert "contract.pdf: corrupt or unreadable PDF" in message
    assert "minutes.docx: unsupported file type '.docx'" in message
    assert "empty.md: empty file" in message


def test_documents_with_headings_only_are_a_clear_error(tmp_path, offline_judge, embedder):
    folder = _write(tmp_path / "headings", {"outline.md": "# Outline\n\n## Scope\n\n## Roles\n"})

    with pytest.raises(ValueError, match="no paragraphs of text") as error:
        _run(folder, offline_judge, embedder)

    assert "outline.md" in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        "# Loading dock\n\nThe loading dock in Venlo must be inspected every morning before 06:00 by the site manager.\n",
        "# Notes\n\nShort note. Nothing else.\n",
    ],
)
def test_a_single_tiny_document_gives_few_items_with_reasons(tmp_path, offline_judge, embedder, text):
    folder = _write(tmp_path / "tiny", {"notes.md": text})

    result = _run(folder, offline_judge, embedder, n=10)

    assert result.n_chunks == 1
    assert len(result.golden) <= 2
    assert len(result.golden) + len(result.rejected) > 0 or result.plan["note"].str.len().gt(0).any()
    # Ten were planned; one chunk cannot give them, and the plan says why for each type.
    assert (result.plan["note"] != "").all()
    assert result.plan.set_index("question_type").loc[MULTI_CONTEXT, "note"] == "only 0 candidate tasks in this corpus"
    _assert_consistent(result)


GERMAN = {
    "lieferung.md": """# Lieferbedingungen der Halcyon Spedition

## Lieferzeiten

Standardlieferungen innerhalb Deutschlands dauern in der Regel zwei bis vier Werktage ab der Abholung im Lager.
Expresssendungen werden am folgenden Werktag zugestellt, wenn die Bestellung vor 14 Uhr bei der Spedition eingeht.

## Rücksendungen

Kunden können unbenutzte Waren innerhalb von 30 Tagen nach der Lieferung an das Lager in Kassel zurücksenden.
Die Erstattung erfolgt innerhalb von fünf Werktagen auf das ursprüngliche Zahlungsmittel des Kunden.
""",
    "datenschutz.md": """# Datenschutzrichtlinie der Halcyon Spedition

## Speicherfristen

Sendungsdaten der Kunden werden für die Dauer des Vertrags und weitere 24 Monate im Rechenzentrum Frankfurt gespeichert.
Protokolle der Programmierschnittstelle werden nach 90 Tagen automatisch gelöscht, sofern kein Rechtsstreit anhängig ist.

## Zuständigkeiten

Der Datenschutzbeauftragte der Spedition prüft die Löschung der Sendungsdaten der Kunden jedes Jahr im März.
Anfragen zur Löschung von Sendungsdaten beantwortet der Kundendienst innerhalb von zehn Werktagen schriftlich.
""",
}


def test_a_corpus_in_another_language_gives_items_or_reasons(tmp_path, offline_judge, embedder):
    folder = _write(tmp_path / "de", GERMAN)

    result = _run(folder, offline_judge, embedder, n=10)

    assert result.n_chunks >= 4 and result.rejected_documents == []
    assert len(result.golden) + len(result.rejected) > 0
    _assert_consistent(result)


def test_unreadable_files_beside_good_ones_are_reported_not_fatal(tmp_path, offline_judge, embedder):
    folder = _write(tmp_path / "mixed", {**GERMAN, "scan.pdf": b"%PDF-garbage"})

    result = _run(folder, offline_judge, embedder, n=4)

    assert [(r.path, r.reason.split(":")[0]) for r in result.rejected_documents] == [
        ("scan.pdf", "corrupt or unreadable PDF")
    ]
    _assert_consistent(result)


# --- a generator that returns empty or malformed items ----------------------------------------------

TEXTS = [
    "RouteWise API request logs are retained for 90 days and then deleted automatically.",
    "Database backups of the shipment system are kept for 35 days in a separate region.",
    "Flights must be booked at least 14 days before departure unless the trip is urgent.",
    "The hotel cap is EUR 230 per night in London, Paris, New York, Zurich and Singapore.",
    "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday.",
    "A forklift certificate is valid for 3 years and must be renewed by passing a practical test.",
    "Customer Shipment Data is retained for the duration of the contract plus 24 months.",
]
CHUNKS = pd.DataFrame(
    [
        {"chunk_id": f"doc{i}.md#0", "doc_id": f"doc{i}.md", "position": 0, "heading": "", "text": t}
        for i, t in enumerate(TEXTS)
    ]
)
# Six test nodes; the last chunk is not one, so six tasks are all a plan of six can try.
NODES = pd.DataFrame(
    {"chunk_id": CHUNKS["chunk_id"], "cluster_id": 0, "cluster_label": "", "test_node_rank": [1, 2, 3, 4, 5, 6, 0]}
)


class FakeMalformedGenerator:
    """A fake generator that writes one well-formed simple item and then malformed ones, in turn: an empty
    question, a blank ground truth, gold ids that name no chunk, no gold ids, and an empty outcome list
    for the last task."""

    name = "fake-malformed"
    prompt_version = "fake-v1"
    supported_types = (SIMPLE,)

    def generate(self, tasks: list[GenerationTask]):
        outcomes = []
        for i, task in enumerate(tasks):
            chunk = task.chunks[0]
            good = make_item(
                task,
                f"What does document {chunk.doc_id} state about the subject of the document?",
                chunk.text,
                self.name,
                "v1",
            )
            malformed = [
                good,
                QAItem(**{**asdict(good), "qa_id": "empty-question", "question": ""}),
                QAItem(**{**asdict(good), "qa_id": "blank-answer", "ground_truth": "   "}),
                QAItem(**{**asdict(good), "qa_id": "unknown-gold", "gold_chunk_ids": ["nowhere.md#7"]}),
                QAItem(**{**asdict(good), "qa_id": "no-gold", "gold_chunk_ids": [], "gold_contexts": []}),
            ]
            if i < len(malformed):
                outcomes.append(malformed[i])
        return outcomes  # one short: the sixth task gets no outcome at all


def test_malformed_generator_output_is_rejected_with_reasons(offline_judge, embedder):
    items, failures, plan = pipeline.synthesize(CHUNKS, NODES, {}, FakeMalformedGenerator(), 6, {SIMPLE: 1})
    golden, rejected, plan = pipeline.verify(items, failures, plan, CHUNKS, offline_judge, embedder)

    assert len(golden) == 1 and golden["question"].iloc[0].startswith("What does document doc0.md")
    reasons = dict(zip(rejected["qa_id"], zip(rejected["stage"], rejected["reason"])))
    assert reasons["empty-question"] == ("form", "question has 0 words, outside 3-80")
    assert reasons["blank-answer"] == ("form", "ground truth has 0 words, outside 1-150")
    assert reasons["unknown-gold"] == ("gold_ids", "gold chunk ids not among the chunks: ['nowhere.md#7']")
    assert reasons["no-gold"] == ("gold_ids", "gold chunk ids not among the chunks: none given")
    # The task the generator answered with nothing is a generation failure, not a silent loss.
    generation = rejected[rejected["stage"] == "generation"]
    assert len(generation) == 1 and "no outcome" in generation["reason"].iloc[0]
    assert generation["source_chunk_ids"].iloc[0] == ["doc5.md#0"]
    assert plan.set_index("question_type").loc[SIMPLE, ["planned", "generated", "kept"]].tolist() == [6, 5, 1]


def test_synthesize_returns_items_failures_and_a_plan(embedder):
    generator = OfflineGenerator(TEXTS)

    items, failures, plan = pipeline.synthesize(CHUNKS, NODES, {}, generator, 6)

    assert list(plan.columns) == GENERATION_PLAN_COLUMNS  # nothing is kept before verification
    assert plan["planned"].sum() == 6
    assert plan["generated"].sum() == len(items)
    assert list(failures.columns) == REJECTED_COLUMNS and set(failures["stage"]) <= {"generation"}
    assert set(items["source_chunk_ids"].explode()) <= set(CHUNKS["chunk_id"])


# --- parse_mix --------------------------------------------------------------------------------------


def test_parse_mix_reads_names_and_weights():
    assert parse_mix("simple,unanswerable") == {SIMPLE: 1.0, UNANSWERABLE: 1.0}
    assert parse_mix(" simple=3 , multi_context=1.5 ,") == {SIMPLE: 3.0, MULTI_CONTEXT: 1.5}


@pytest.mark.parametrize(
    "text, message",
    [
        ("simple,trivia", "unknown question type 'trivia'"),
        ("simple=lots", "the weight of 'simple' must be a number"),
        ("", "no question types given"),
        (" , ", "no question types given"),
    ],
)
def test_parse_mix_rejects_bad_input(text, message):
    with pytest.raises(ValueError, match=message):
        parse_mix(text)
