"""Question generation: the offline template generator, and the driver that walks the candidate tasks."""

from __future__ import annotations

import re

import pytest

from rag_eval_pipeline.core.text import content_words, split_sentences
from rag_eval_pipeline.synthesis.absent_facts import frames_for, kind_of, topic_phrases
from rag_eval_pipeline.synthesis.generation import MAX_TRIES_PER_ITEM, generate_items
from rag_eval_pipeline.synthesis.items import (
    ITEM_COLUMNS,
    MULTI_CONTEXT,
    REASONING,
    REFUSAL,
    SIMPLE,
    UNANSWERABLE,
    GenerationFailure,
    GenerationTask,
    QAItem,
    SourceChunk,
    failures_frame,
    items_frame,
    make_item,
)
from rag_eval_pipeline.synthesis.offline_generation import _PHRASINGS, OfflineGenerator
from rag_eval_pipeline.synthesis.planning import TypePlan
from rag_eval_pipeline.synthesis.quality import QualityContext, assess
from rag_eval_pipeline.synthesis.test_nodes import factual_sentences


def _chunk(chunk_id: str, title: str, heading: str, text: str) -> SourceChunk:
    return SourceChunk(chunk_id, chunk_id.split("#")[0], title, heading, text)


# Every chunk here holds a factual sentence that one of the simple templates can ask about.
CHUNKS = {
    c.chunk_id: c
    for c in [
        _chunk(
            "retention.md#0",
            "Data Retention Policy",
            "Retention",
            "Logs are short lived. RouteWise API request logs are retained for 90 days and then deleted automatically.",
        ),
        _chunk(
            "retention.md#1",
            "Data Retention Policy",
            "Backups",
            "Database backups of the shipment system are kept for 35 days in a separate region.",
        ),
        _chunk(
            "retention.md#3",
            "Data Retention Policy",
            "Roles",
            "The Data Governance Council is the body that approves exceptions to the retention periods.",
        ),
        _chunk(
            "travel.md#0",
            "Travel Policy",
            "Flights",
            "Flights must be booked at least 14 days before departure unless the trip is urgent.",
        ),
        _chunk(
            "travel.md#1",
            "Travel Policy",
            "Purpose",
            "Finance Operations owns this policy and reviews it every January with the Chief Financial Officer.",
        ),
        _chunk(
            "oncall.md#0",
            "On-Call Handbook",
            "Shifts",
            "An on-call shift at Halcyon Freight lasts exactly 7 days from Monday to Monday.",
        ),
    ]
}
CORPUS = [c.text for c in CHUNKS.values()]


def _task(question_type: str, *chunks: SourceChunk, cluster: int = 0) -> GenerationTask:
    return GenerationTask(question_type, tuple(chunks), cluster, "label")


def _one(question_type: str, *chunks: SourceChunk, corpus: list[str] = CORPUS):
    [outcome] = OfflineGenerator(corpus).generate([_task(question_type, *chunks)])
    return outcome


def _item(question_type: str, *chunks: SourceChunk, corpus: list[str] = CORPUS) -> QAItem:
    outcome = _one(question_type, *chunks, corpus=corpus)
    assert isinstance(outcome, QAItem), outcome
    return outcome


def _phrasing_index(template: str, question: str, **fields: str) -> int | None:
    """Which of the template's phrasings the question is, filled in with `fields`; None when it is none of them."""
    for index, phrasing in enumerate(_PHRASINGS[template]):
        if " ".join(phrasing.format(**fields).split()) == question:
            return index
    return None


def _renamed(chunk: SourceChunk, n: int) -> SourceChunk:
    """The same chunk under another id (another document of the same title): another task, the same text."""
    doc_id = f"{chunk.doc_id.split('.')[0]}-{n}.md"
    return SourceChunk(f"{doc_id}#{chunk.chunk_id.split('#')[1]}", doc_id, chunk.title, chunk.heading, chunk.text)


# Enough tasks that every phrasing of a template turns up (the choice is by a hash of the task's id).
TASKS_PER_SET = 12


def _items_over_a_set(question_type: str, *chunks: SourceChunk, corpus: list[str]) -> list[QAItem]:
    """One item per renamed copy of the chunks: a set of tasks that differ only in their ids."""
    return [_item(question_type, *(_renamed(c, n) for c in chunks), corpus=corpus) for n in range(TASKS_PER_SET)]


# --- simple -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_id", list(CHUNKS))
def test_simple_ground_truth_is_a_sentence_of_its_only_gold_chunk(chunk_id):
    chunk = CHUNKS[chunk_id]
    [item] = OfflineGenerator(CORPUS).generate([_task(SIMPLE, chunk, cluster=4)])

    assert isinstance(item, QAItem)
    assert item.gold_chunk_ids == item.source_chunk_ids == [chunk_id]
    assert item.gold_contexts == [chunk.text]
    assert item.ground_truth in split_sentences(chunk.text)
    assert item.ground_truth in factual_sentences(chunk.text)
    assert (item.question_type, item.source_cluster) == (SIMPLE, 4)
    assert (item.generator, item.prompt_version) == (OfflineGenerator.name, OfflineGenerator.prompt_version)
    assert item.template in ("definition", "quantity", "subject")
    assert item.question.endswith(("?", '"'))
    assert item.question != item.ground_truth


def test_the_most_informative_sentence_is_chosen():
    chunk = _chunk(
        "archive.md#0",
        "Archive Rules",
        "Contracts",
        "The archive team works closely with the legal department on every request. "
        "Closed contracts are stored for 10 years under legal hold in the Zurich archive.",
    )

    item = _item(SIMPLE, chunk)

    # Both sentences are facts; the one with a quantity and a name is the one worth checking.
    assert item.ground_truth.startswith("Closed contracts are stored for 10 years")
    # "Logs are short lived." is too short to be a fact at all.
    assert _item(SIMPLE, CHUNKS["retention.md#0"]).ground_truth.startswith(
        "RouteWise API request logs are retained for 90 days"
    )


@pytest.mark.parametrize(
    "sentence, value",
    [
        ("Flights must be booked at least 14 days before departure unless the trip is urgent.", "14 days"),
        ("The penalty for a late delivery is 15% of the monthly invoice for the affected route.", "15%"),
        ("The RouteWise API has a monthly availability target of 99.9 percent for Standard customers.", "99.9 percent"),
    ],
)
def test_quantity_questions_blank_the_value_they_ask_for(sentence, value):
    chunk = _chunk("policy.md#0", "Travel Policy", "Rules", sentence)

    items = _items_over_a_set(SIMPLE, chunk, corpus=[sentence])

    for item in items:
        assert item.template == "quantity" and item.topic == ""
        assert item.ground_truth == sentence
        assert value not in item.question and item.question.count("____") == 1
        # The blank filled with the value gives back the sentence, in one of the template's phrasings.
        assert (
            _phrasing_index("quantity", item.question.replace("____", value), title="Travel Policy", blanked=sentence)
            is not None
        )


def test_a_sentence_holding_quotes_or_opening_in_lower_case_is_not_blanked():
    # Its quotes would nest inside the question's; a lower-case start is a fragment of a sentence.
    for text in (
        'The "Express" tariff lets a customer ship parcels within 2 days across the region.',
        "continued: parcels are shipped within 2 days across the whole region by the carrier.",
    ):
        outcome = _one(SIMPLE, _chunk("tariffs.md#0", "Tariffs", "Express", text), corpus=[text])
        assert not (isinstance(outcome, QAItem) and outcome.template == "quantity"), outcome


def test_definition_questions_ask_what_the_term_is():
    item = _item(SIMPLE, CHUNKS["retention.md#3"])

    assert item.template == "definition"
    assert item.topic == "Data Governance Council"
    assert (
        _phrasing_index(
            "definition", item.question, verb="is", term="Data Governance Council", title="Data Retention Policy"
        )
        is not None
    )
    assert item.ground_truth == CHUNKS["retention.md#3"].text


def test_subject_questions_name_the_section_and_the_document():
    item = _item(SIMPLE, CHUNKS["travel.md#1"])

    assert item.template == "subject"
    assert item.topic == "Finance Operations"
    assert (
        _phrasing_index(
            "subject", item.question, where='the "Purpose" section of "Travel Policy"', subject="Finance Operations"
        )
        is not None
    )


@pytest.mark.parametrize(
    "heading",
    [
        "",
        "Travel Policy",
        "August 2015",
        "Commonly Confused Words and",
        "2019 2020 2021",
        # Cells of a table row read as one line: a word twice, or title case and lower case mixed.
        "Proper nouns Common nouns",
        "United States country",
        "Nouns nouns",
        # Brackets belong to a label, not to a name a question can quote.
        "Nouns (plural)",
        "Verbs [irregular]",
    ],
)
def test_a_heading_not_worth_naming_leaves_only_the_document(heading):
    chunk = _chunk("travel.md#1", "Travel Policy", heading, CHUNKS["travel.md#1"].text)

    item = _item(SIMPLE, chunk)

    assert item.template == "subject"
    assert _phrasing_index("subject", item.question, where='"Travel Policy"', subject="Finance Operations") is not None


@pytest.mark.parametrize(
    "heading", ["Purpose", "Purpose of the policy", "Travel in the United States", "Leave and holidays"]
)
def test_a_heading_in_title_or_sentence_case_is_named(heading):
    # The near misses of joined cells: one case throughout, a name after a function word.
    chunk = _chunk("travel.md#1", "Travel Policy", heading, CHUNKS["travel.md#1"].text)

    item = _item(SIMPLE, chunk)

    assert (
        _phrasing_index(
            "subject", item.question, where=f'the "{heading}" section of "Travel Policy"', subject="Finance Operations"
        )
        is not None
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "It runs every night on the main database server of the shipment system.",
        "This policy applies to every employee of Halcyon Freight in every country.",
        "There are two warehouses near the port that handle frozen goods for the region.",
        "When observing tests it helps to note the time and the name of the engineer.",
    ],
)
def test_a_subject_that_does_not_stand_on_its_own_gives_no_question(sentence):
    outcome = _one(SIMPLE, _chunk("notes.md#0", "Notes", "Tips", sentence), corpus=[sentence])

    assert isinstance(outcome, GenerationFailure), outcome.question
    assert "no template fits" in outcome.reason


def test_a_chunk_without_a_factual_sentence_is_a_failure_with_its_reason():
    for text in ("Short. Too short. Yes.", "Which of the eight warehouses in the region handle frozen goods today?"):
        outcome = _one(SIMPLE, _chunk("x.md#0", "X", "", text))
        assert isinstance(outcome, GenerationFailure)
        assert outcome.reason == "the chunk holds no factual sentence to ask about"
        assert outcome.generator == OfflineGenerator.name


# No definition ("is the/a"), no quantity with a unit, no verb of the subject template.
NO_TEMPLATE = "Every shift starts and ends on Monday at 10:00 Central European Time."


def test_a_chunk_no_template_fits_is_a_failure_with_its_reason():
    outcome = _one(SIMPLE, _chunk("oncall.md#3", "On-Call Handbook", "Shifts", NO_TEMPLATE))

    assert isinstance(outcome, GenerationFailure)
    assert "no template fits" in outcome.reason


def test_a_less_informative_sentence_is_used_when_no_template_fits_the_best():
    fitting = "The pager rotation is the list of engineers who take turns on call."
    chunk = _chunk("oncall.md#3", "On-Call Handbook", "Shifts", f"{NO_TEMPLATE} {fitting}")

    item = _item(SIMPLE, chunk)

    assert (item.ground_truth, item.template) == (fitting, "definition")


# --- multi_context ----------------------------------------------------------------------------------

SHIPMENT_RETENTION = _chunk(
    "retention.md#2",
    "Data Retention Policy",
    "Retention Periods",
    "Customer Shipment Data is retained for the duration of the contract plus 24 months. Logs are kept elsewhere.",
)
SHIPMENT_DELETION = _chunk(
    "sla.md#1",
    "Customer SLA Summary",
    "Data Protection",
    "A customer may ask Halcyon Freight to delete its Customer Shipment Data before the end of the contract.",
)
MULTI_CORPUS = CORPUS + [SHIPMENT_RETENTION.text, SHIPMENT_DELETION.text]


def test_multi_context_question_names_both_documents_and_the_shared_term():
    item = _item(MULTI_CONTEXT, SHIPMENT_RETENTION, SHIPMENT_DELETION, corpus=MULTI_CORPUS)

    assert item.template == "shared-topic"
    assert "customer shipment" in item.topic.lower()
    assert (
        _phrasing_index(
            "shared-topic", item.question, both='"Data Retention Policy" and "Customer SLA Summary"', term=item.topic
        )
        is not None
    )
    # One sentence of each chunk, in the chunks' order; both chunks are gold.
    first, second = factual_sentences(SHIPMENT_RETENTION.text)[0], factual_sentences(SHIPMENT_DELETION.text)[0]
    assert item.ground_truth == f"{first} {second}"
    assert item.gold_chunk_ids == ["retention.md#2", "sla.md#1"]
    assert item.gold_contexts == [SHIPMENT_RETENTION.text, SHIPMENT_DELETION.text]


def test_multi_context_in_one_document_names_the_two_sections():
    other_section = _chunk(
        "retention.md#7",
        "Data Retention Policy",
        "Customer Requests",
        "A customer may ask Halcyon Freight to delete its Customer Shipment Data before the end of the contract.",
    )

    item = _item(
        MULTI_CONTEXT, SHIPMENT_RETENTION, other_section, corpus=CORPUS + [SHIPMENT_RETENTION.text, other_section.text]
    )

    both = 'the "Retention Periods" and "Customer Requests" sections of "Data Retention Policy"'
    assert _phrasing_index("shared-topic", item.question, both=both, term=item.topic) is not None


def test_a_shared_term_after_to_is_a_verb_not_a_topic():
    # "to book flights" is something to do; asking what two documents say "about book flights" reads badly.
    first = _chunk(
        "travel.md#5", "Travel Policy", "Booking", "Staff are asked to book flights at least 14 days ahead of any trip."
    )
    second = _chunk(
        "onboarding.md#2",
        "Onboarding Guide",
        "First Week",
        "Managers are asked to book flights for new starters well in advance.",
    )

    outcome = _one(MULTI_CONTEXT, first, second, corpus=[first.text, second.text])

    assert isinstance(outcome, GenerationFailure) and "share no noun phrase" in outcome.reason


def test_multi_context_in_one_section_or_without_a_shared_term_fails_with_a_reason():
    same_section = _chunk("retention.md#5", "Data Retention Policy", "Retention Periods", SHIPMENT_DELETION.text)
    outcome = _one(MULTI_CONTEXT, SHIPMENT_RETENTION, same_section, corpus=MULTI_CORPUS)
    assert isinstance(outcome, GenerationFailure) and "one section" in outcome.reason

    outcome = _one(MULTI_CONTEXT, SHIPMENT_RETENTION, CHUNKS["travel.md#0"], corpus=MULTI_CORPUS)
    assert isinstance(outcome, GenerationFailure) and "share no noun phrase" in outcome.reason


# --- unanswerable -----------------------------------------------------------------------------------

# Three names of kinds the frames know: a college, a museum (organisations) and a road.
COLLEGE = _chunk(
    "roads.md#2",
    "Town Report",
    "Roads",
    "Students of Edmonds Community College walk to the Natural History Museum along Chobham Road every Friday.",
)
# Common nouns only, however modified: "the town council" leaves a reader asking which council.
COMMON_NOUNS = _chunk(
    "roads.md#3",
    "Town Report",
    "Roads",
    "The town council spent the regional grant on new cycle lanes along the canal.",
)
# Its heading names a thing, but its sentence names nothing of a kind whose facts the frames know.
FORKLIFT = _chunk(
    "safety.md#4",
    "Warehouse Safety Standard",
    "Forklift Certificates",
    "A forklift certificate is valid for 3 years and must be renewed by passing a practical test.",
)


def _frame_of(question: str, topic: str):
    [frame] = [f for f in frames_for(topic) if f.question.format(topic=topic) == question]
    return frame


def _states(corpus: list[str], topic: str, answer_words: tuple[str, ...]) -> bool:
    topic_words, asked = set(content_words(topic)), {w for a in answer_words for w in content_words(a)}
    return any(topic_words <= set(content_words(t)) and asked & set(content_words(t)) for t in corpus)


def test_unanswerable_expects_the_refusal_and_has_no_gold_chunks():
    corpus = CORPUS + [COLLEGE.text]

    item = _item(UNANSWERABLE, COLLEGE, corpus=corpus)

    assert item.ground_truth == REFUSAL
    assert item.gold_chunk_ids == [] and item.gold_contexts == []
    assert item.source_chunk_ids == ["roads.md#2"]
    assert item.template == "absent-fact"
    # It asks about a noun phrase of the chunk's own sentence, for a kind of fact no chunk states about it.
    assert item.topic in topic_phrases(COLLEGE.text)
    assert not _states(corpus, item.topic, _frame_of(item.question, item.topic).answer_words)


@pytest.mark.parametrize(
    "sentence, kind",
    [
        ("Children visit the Natural History Museum with their teachers on Fridays.", "organisation"),
        ("Farmers applied to the Countryside Stewardship scheme in the spring.", "programme"),
        ("Engineers at the depot rely on the Tracker system every night of the week.", "method"),
        ("Walkers reached Mayfield village before noon on the first day.", "settlement"),
        ("Visitors to Shepperton Church can park behind the old school in summer.", "building"),
        ("Walkers cross Epsom Common on the way to the station in summer.", "landmark"),
        ("Trains on the Oxford railway stop at Didcot twice an hour.", "route"),
        ("Trains to Chobham Road were cancelled after the storm in March.", "route"),
        ("Readers of the Strand Magazine wrote to Conan Doyle in their thousands.", "work"),
    ],
)
def test_unanswerable_frames_fit_the_kind_of_their_topic(sentence, kind):
    chunk = _chunk("town.md#0", "Town Guide", "Around Town", sentence)

    items = _items_over_a_set(UNANSWERABLE, chunk, corpus=[sentence])

    for item in items:
        assert kind_of(item.topic) == kind
        assert item.question in {f.question.format(topic=item.topic) for f in frames_for(item.topic)}
    assert len({i.question for i in items}) > 1  # the frame, like a phrasing, varies with the task


def test_unanswerable_picks_another_frame_when_the_corpus_states_the_first():
    first = _item(UNANSWERABLE, COLLEGE, corpus=[COLLEGE.text])
    answer_words = _frame_of(first.question, first.topic).answer_words
    stating = f"For {first.topic} the {' and '.join(answer_words)} are recorded by the clerk every month."
    corpus = [COLLEGE.text, stating]
    assert _states(corpus, first.topic, answer_words)

    second = _item(UNANSWERABLE, COLLEGE, corpus=corpus)

    assert second.topic == first.topic and second.question != first.question
    assert not _states(corpus, second.topic, _frame_of(second.question, second.topic).answer_words)


def _stating_every_fact(topic: str) -> str:
    words = sorted({w for f in frames_for(topic) for w in f.answer_words})
    return f"For {topic}: {', '.join(words)} are all listed in the annual report."


def test_unanswerable_moves_to_the_next_topic_when_the_corpus_states_every_fact_of_the_first():
    first, second = topic_phrases(COLLEGE.text)[:2]
    corpus = [COLLEGE.text, _stating_every_fact(first)]

    item = _item(UNANSWERABLE, COLLEGE, corpus=corpus)

    assert (first, second) == ("Edmonds Community College", "the Natural History Museum")
    assert item.topic == second and kind_of(item.topic) == "organisation"


def test_unanswerable_fails_when_the_corpus_states_every_kind_of_fact():
    corpus = [COLLEGE.text] + [_stating_every_fact(t) for t in topic_phrases(COLLEGE.text)]

    outcome = _one(UNANSWERABLE, COLLEGE, corpus=corpus)

    assert isinstance(outcome, GenerationFailure)
    assert "every kind of fact" in outcome.reason and "Edmonds Community College" in outcome.reason


@pytest.mark.parametrize(
    "chunk",
    [
        FORKLIFT,
        _chunk("notes.txt#0", "Notes", "", "Short. Yes."),
        _chunk("roads.md#3", "Town Report", "Roads", "The council spent the grant on roads in the north of the town."),
        COMMON_NOUNS,
    ],
    ids=["no known kind", "no factual sentence", "only bare heads", "only common nouns"],
)
def test_unanswerable_from_a_chunk_naming_nothing_of_a_known_kind_fails_with_its_reason(chunk):
    outcome = _one(UNANSWERABLE, chunk, corpus=CORPUS + [chunk.text])

    assert isinstance(outcome, GenerationFailure)
    assert outcome.reason.startswith("the chunk names nothing whose facts a template knows")


# --- the quality stage ------------------------------------------------------------------------------


def _passes_quality(item: QAItem, chunks: tuple[SourceChunk, ...]) -> str | None:
    """The quality stage's reason to reject the item, None when it keeps it."""
    context = QualityContext(source=" ".join(c.text for c in chunks))
    return assess(item.question, item.question_type, item.topic, context).problem


@pytest.mark.parametrize(
    "question_type, chunks",
    [
        pytest.param(SIMPLE, (CHUNKS["travel.md#0"],), id="quantity"),
        pytest.param(SIMPLE, (CHUNKS["retention.md#3"],), id="definition"),
        pytest.param(SIMPLE, (CHUNKS["travel.md#1"],), id="subject"),
        pytest.param(MULTI_CONTEXT, (SHIPMENT_RETENTION, SHIPMENT_DELETION), id="shared-topic"),
        pytest.param(UNANSWERABLE, (COLLEGE,), id="absent-fact"),
    ],
)
def test_every_phrasing_the_generator_writes_passes_the_quality_stage(question_type, chunks):
    items = _items_over_a_set(question_type, *chunks, corpus=MULTI_CORPUS + [COLLEGE.text])

    problems = {i.question: _passes_quality(i, chunks) for i in items}

    assert not {q: p for q, p in problems.items() if p}


# --- phrasings --------------------------------------------------------------------------------------


def _phrasing_shape(template: str, question: str) -> int | None:
    """Which of the template's phrasings the question has, whatever its blanks were filled with."""
    for index, phrasing in enumerate(_PHRASINGS[template]):
        pattern = "".join(
            "(.+)" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{\w+\})", phrasing)
        )
        if re.fullmatch(pattern, question):
            return index
    return None


def test_the_same_task_always_gets_the_same_phrasing():
    tasks = [_task(SIMPLE, c) for c in CHUNKS.values()] + [_task(UNANSWERABLE, COLLEGE)]
    corpus = CORPUS + [COLLEGE.text]

    first = OfflineGenerator(corpus).generate(tasks)
    in_reverse = OfflineGenerator(corpus).generate(list(reversed(tasks)))[::-1]
    other_cluster = OfflineGenerator(corpus).generate([_task(t.question_type, *t.chunks, cluster=9) for t in tasks])

    assert [o.question for o in first] == [o.question for o in in_reverse] == [o.question for o in other_cluster]


@pytest.mark.parametrize(
    "template, question_type, chunks",
    [
        ("quantity", SIMPLE, (CHUNKS["travel.md#0"],)),
        ("definition", SIMPLE, (CHUNKS["retention.md#3"],)),
        ("subject", SIMPLE, (CHUNKS["travel.md#1"],)),
        ("shared-topic", MULTI_CONTEXT, (SHIPMENT_RETENTION, SHIPMENT_DELETION)),
    ],
)
def test_different_tasks_get_different_phrasings_across_a_set(template, question_type, chunks):
    items = _items_over_a_set(question_type, *chunks, corpus=MULTI_CORPUS)

    assert {i.template for i in items} == {template}
    shapes = [_phrasing_shape(template, i.question) for i in items]
    assert None not in shapes
    assert set(shapes) == set(range(len(_PHRASINGS[template])))  # every phrasing is used somewhere in the set


# --- what it does not write -------------------------------------------------------------------------


def test_reasoning_is_a_failure_with_a_reason_not_an_item():
    assert REASONING not in OfflineGenerator.supported_types

    outcome = _one(REASONING, CHUNKS["travel.md#0"])

    assert isinstance(outcome, GenerationFailure)
    assert outcome.reason == "the offline generator cannot write reasoning questions"


def test_outcomes_come_back_one_per_task_in_order():
    tasks = [
        _task(SIMPLE, CHUNKS["travel.md#0"]),
        _task(REASONING, CHUNKS["travel.md#0"]),
        _task(UNANSWERABLE, COLLEGE),
        _task(SIMPLE, CHUNKS["oncall.md#0"]),
    ]

    outcomes = OfflineGenerator(CORPUS + [COLLEGE.text]).generate(tasks)

    assert [type(o) for o in outcomes] == [QAItem, GenerationFailure, QAItem, QAItem]
    assert [o.question_type if isinstance(o, QAItem) else o.task.question_type for o in outcomes] == [
        SIMPLE,
        REASONING,
        UNANSWERABLE,
        SIMPLE,
    ]


# --- stable ids -------------------------------------------------------------------------------------


def _all_tasks() -> list[GenerationTask]:
    return [_task(SIMPLE, c) for c in CHUNKS.values()] + [
        _task(MULTI_CONTEXT, SHIPMENT_RETENTION, SHIPMENT_DELETION),
        _task(UNANSWERABLE, COLLEGE),
    ]


def test_qa_ids_are_stable_across_runs_and_unaffected_by_other_chunks():
    corpus = MULTI_CORPUS + [COLLEGE.text]
    first = OfflineGenerator(corpus).generate(_all_tasks())
    second = OfflineGenerator(list(corpus)).generate(_all_tasks())
    third = OfflineGenerator(corpus + ["The new loading dock in Venlo opens at 06:00 on every working day."]).generate(
        _all_tasks()
    )

    assert all(isinstance(o, QAItem) for o in first)
    assert [(o.qa_id, o.question) for o in first] == [(o.qa_id, o.question) for o in second]
    simple_ids = {o.gold_chunk_ids[0]: o.qa_id for o in first if o.question_type == SIMPLE}
    assert {o.gold_chunk_ids[0]: o.qa_id for o in third if o.question_type == SIMPLE} == simple_ids
    assert len({o.qa_id for o in first}) == len(first)


def test_qa_id_depends_on_type_gold_chunks_and_normalised_question():
    task = _task(SIMPLE, CHUNKS["travel.md#0"])
    base = make_item(task, "How early must flights be booked?", "x y", "g", "v")

    assert make_item(task, "  how early MUST flights be booked  ", "other", "g2", "v2").qa_id == base.qa_id
    assert make_item(task, "How late must flights be booked?", "x y", "g", "v").qa_id != base.qa_id
    assert make_item(_task(SIMPLE, CHUNKS["oncall.md#0"]), base.question, "x y", "g", "v").qa_id != base.qa_id
    assert make_item(_task(REASONING, CHUNKS["travel.md#0"]), base.question, "x y", "g", "v").qa_id != base.qa_id


def test_item_and_failure_frames_have_their_columns():
    outcomes = OfflineGenerator(CORPUS).generate(
        [_task(SIMPLE, CHUNKS["travel.md#0"]), _task(REASONING, CHUNKS["travel.md#0"])]
    )
    items = [o for o in outcomes if isinstance(o, QAItem)]
    failures = [o for o in outcomes if isinstance(o, GenerationFailure)]

    frame = items_frame(items)
    assert list(frame.columns) == ITEM_COLUMNS and frame["qa_id"].tolist() == [items[0].qa_id]
    assert frame["topic"].tolist() == [items[0].topic]
    assert items_frame([]).empty and list(items_frame([]).columns) == ITEM_COLUMNS
    rejected = failures_frame(failures)
    assert rejected["stage"].tolist() == ["generation"]
    assert rejected["reason"].tolist() == [failures[0].reason]
    assert rejected["qa_id"].iloc[0] == f"task-{failures[0].task.task_id}"
    assert rejected["source_chunk_ids"].iloc[0] == ["travel.md#0"]
    assert rejected["topic"].tolist() == [""]


# --- the driver -------------------------------------------------------------------------------------


class FakeGenerator:
    """A fake generator for the driver tests: writes an item for every task except those of the chunks in
    `fail_on`, and records the batches it was given. `mode` makes it misbehave on purpose."""

    name = "fake"
    prompt_version = "fake-v1"
    supported_types = (SIMPLE, UNANSWERABLE)

    def __init__(self, fail_on: set[str] = frozenset(), mode: str = "ok"):
        self.fail_on, self.mode = set(fail_on), mode
        self.batches: list[list[GenerationTask]] = []

    def generate(self, tasks: list[GenerationTask]):
        self.batches.append(list(tasks))
        if self.mode == "nothing":
            return []
        if self.mode == "retype":  # items of another type than the task asked for
            return [
                make_item(GenerationTask(REASONING, t.chunks, 0), "Why would that be so?", "Because.", self.name, "v")
                for t in tasks
            ]
        outcomes = []
        for task in tasks:
            chunk_id = task.chunks[0].chunk_id
            if chunk_id in self.fail_on:
                outcomes.append(GenerationFailure(task, self.name, f"fake failure on {chunk_id}"))
            else:
                outcomes.append(
                    make_item(
                        task, f"What does {chunk_id} say?", f"It says {chunk_id}.", self.name, self.prompt_version
                    )
                )
        return outcomes

    @property
    def tried(self) -> list[str]:
        return [t.chunks[0].chunk_id for batch in self.batches for t in batch]


def _candidates(question_type: str, n: int, prefix: str = "c") -> list[GenerationTask]:
    return [_task(question_type, _chunk(f"{prefix}.md#{i}", "T", "", f"text {i}")) for i in range(n)]


def test_driver_stops_at_the_planned_count():
    generator = FakeGenerator()

    items, failures = generate_items(generator, [TypePlan(SIMPLE, 2, 2)], {SIMPLE: _candidates(SIMPLE, 5)})

    assert [i.source_chunk_ids[0] for i in items] == ["c.md#0", "c.md#1"]
    assert generator.tried == ["c.md#0", "c.md#1"]  # no task beyond what the plan needs
    assert failures == []


def test_driver_tries_the_next_candidate_when_the_generator_fails():
    generator = FakeGenerator(fail_on={"c.md#0", "c.md#2"})

    items, failures = generate_items(generator, [TypePlan(SIMPLE, 2, 2)], {SIMPLE: _candidates(SIMPLE, 6)})

    assert [i.source_chunk_ids[0] for i in items] == ["c.md#1", "c.md#3"]
    assert [f.reason for f in failures] == ["fake failure on c.md#0", "fake failure on c.md#2"]
    assert generator.tried == ["c.md#0", "c.md#1", "c.md#2", "c.md#3"]


def test_driver_gives_up_after_a_bounded_number_of_tries():
    candidates = _candidates(SIMPLE, 50)
    generator = FakeGenerator(fail_on={t.chunks[0].chunk_id for t in candidates})

    items, failures = generate_items(generator, [TypePlan(SIMPLE, 2, 2)], {SIMPLE: candidates})

    assert items == []
    assert len(generator.tried) == len(failures) == MAX_TRIES_PER_ITEM * 2
    assert len(set(generator.tried)) == len(generator.tried)  # never the same task twice


def test_driver_with_fewer_candidates_than_planned_writes_what_it_can():
    items, failures = generate_items(FakeGenerator(), [TypePlan(SIMPLE, 5, 5)], {SIMPLE: _candidates(SIMPLE, 2)})

    assert len(items) == 2 and failures == []


def test_driver_works_on_all_types_at_once_and_skips_unplanned_ones():
    generator = FakeGenerator(fail_on={"s.md#0"})
    plans = [TypePlan(SIMPLE, 2, 2), TypePlan(REASONING, 1, 0), TypePlan(UNANSWERABLE, 1, 1)]
    candidates = {
        SIMPLE: _candidates(SIMPLE, 4, "s"),
        REASONING: _candidates(REASONING, 4, "r"),
        UNANSWERABLE: _candidates(UNANSWERABLE, 4, "u"),
    }

    items, failures = generate_items(generator, plans, candidates)

    # round 1: both planned types together; round 2: the simple item that failed is replaced
    assert [[t.chunks[0].chunk_id for t in batch] for batch in generator.batches] == [
        ["s.md#0", "s.md#1", "u.md#0"],
        ["s.md#2"],
    ]
    assert sorted((i.question_type, i.source_chunk_ids[0]) for i in items) == [
        (SIMPLE, "s.md#1"),
        (SIMPLE, "s.md#2"),
        (UNANSWERABLE, "u.md#0"),
    ]
    assert [f.task.chunks[0].chunk_id for f in failures] == ["s.md#0"]
    assert not any(t.question_type == REASONING for batch in generator.batches for t in batch)


def test_driver_records_a_failure_for_every_task_the_generator_returned_nothing_for():
    generator = FakeGenerator(mode="nothing")

    items, failures = generate_items(generator, [TypePlan(SIMPLE, 2, 2)], {SIMPLE: _candidates(SIMPLE, 10)})

    assert items == []
    assert len(failures) == len(generator.tried) == MAX_TRIES_PER_ITEM * 2
    assert [f.task.chunks[0].chunk_id for f in failures] == generator.tried
    assert all(f.generator == "fake" and "no outcome" in f.reason for f in failures)


def test_driver_turns_items_of_the_wrong_type_into_failures():
    generator = FakeGenerator(mode="retype")

    items, failures = generate_items(
        generator,
        [TypePlan(SIMPLE, 1, 1), TypePlan(UNANSWERABLE, 1, 1)],
        {SIMPLE: _candidates(SIMPLE, 2, "s"), UNANSWERABLE: _candidates(UNANSWERABLE, 2, "u")},
    )

    assert items == []
    assert len(failures) == len(generator.tried) == 4  # every candidate tried, none lost
    assert {f.reason for f in failures} == {
        "the generator returned a reasoning item for a simple task",
        "the generator returned a reasoning item for a unanswerable task",
    }


def test_driver_tries_as_many_tasks_per_item_as_the_generator_asks_for():
    class PatientGenerator(FakeGenerator):
        tries_per_item = MAX_TRIES_PER_ITEM + 2

    candidates = _candidates(SIMPLE, 50)
    generator = PatientGenerator(fail_on={t.chunks[0].chunk_id for t in candidates})

    items, failures = generate_items(generator, [TypePlan(SIMPLE, 2, 2)], {SIMPLE: candidates})

    assert items == []
    assert len(generator.tried) == len(failures) == (MAX_TRIES_PER_ITEM + 2) * 2
    # The offline generator asks for more: a template fails in microseconds.
    assert OfflineGenerator.tries_per_item > MAX_TRIES_PER_ITEM
