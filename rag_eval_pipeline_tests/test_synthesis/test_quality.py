"""The quality stage and the noun-phrase checks under it: questions a reviewer would throw out are rejected
with a reason, questions a reviewer would keep get a score above 0."""

from __future__ import annotations

import pytest

from rag_eval_pipeline.synthesis.absent_facts import frames_for, kind_of, topic_phrases
from rag_eval_pipeline.synthesis.items import MULTI_CONTEXT, SIMPLE, UNANSWERABLE
from rag_eval_pipeline.synthesis.phrases import is_date, phrase_problem
from rag_eval_pipeline.synthesis.quality import QualityContext, assess

NO_CONTEXT = QualityContext()
HANDBOOK = QualityContext(
    source="New employees get the annual leave allowance of 25 days. The report is addressed to the board."
)

# --- assess: the bad questions of real runs -------------------------------------------------------

# (question, type, topic the template recorded ("" for an LLM's question), context, a word of the reason)
REJECTED = {
    "too short, and 'There' names nothing": ("What is There?", SIMPLE, "There", NO_CONTEXT, "too short"),
    "an expletive as the topic": ("What does the staff handbook say about There?", SIMPLE, "", NO_CONTEXT, "pronoun"),
    "a definite reference to nothing named": ("What is the guide?", SIMPLE, "", NO_CONTEXT, "unnamed"),
    "a label and a clause ending in 'it'": (
        "What does the guide say about TIP: When observing tests it?",
        SIMPLE,
        "",
        NO_CONTEXT,
        "label",
    ),
    "a label and a clause as the topic": (
        "What does the guide say about TIP: When observing tests?",
        SIMPLE,
        "TIP: When observing tests",
        NO_CONTEXT,
        "label",
    ),
    "a quantifier phrase": ('What does "X" say about  All staff?', SIMPLE, "", NO_CONTEXT, "quantifier"),
    "a word cut short": (
        'What do the "A" and "B" sections of "C" each say about improvement w?',
        MULTI_CONTEXT,
        "improvement w",
        QualityContext(source="The board agreed the improvement work for 2021."),
        "cut short",
    ),
    "a word cut short, no declared topic": (
        'What do the "A" and "B" sections of "C" each say about improvement w?',
        MULTI_CONTEXT,
        "",
        QualityContext(source="The board agreed the improvement work for 2021."),
        "cut short",
    ),
    "a date as the topic of an absent fact": (
        "What was the total budget spent on August 2015 last year?",
        UNANSWERABLE,
        "August 2015",
        NO_CONTEXT,
        "August 2015",
    ),
    "a section's name as the topic": (
        "What is the phone number of the person responsible for History?",
        UNANSWERABLE,
        "History",
        QualityContext(section_names=frozenset({"history", "sources"})),
        "section",
    ),
    "table debris quoted as the statement": (
        'According to "Jobs", what value fills the blank in "____ jobs by industry Manufacturing 5 , 300 13 ."?',
        SIMPLE,
        "",
        NO_CONTEXT,
        "table debris",
    ),
    "no question word": ("The retention period of the request logs?", SIMPLE, "", NO_CONTEXT, "no question word"),
    "no question mark": ("How long are the request logs retained.", SIMPLE, "", NO_CONTEXT, "'?'"),
    "lower-case start": ("how long are the request logs retained?", SIMPLE, "", NO_CONTEXT, "capital"),
    "a word twice in a row": ("How long are the the request logs retained?", SIMPLE, "", NO_CONTEXT, "repeated"),
    "words run together": (
        "How long are Inawelfarestatehowshallwedealwithlogs retained?",
        SIMPLE,
        "",
        NO_CONTEXT,
        "run together",
    ),
    "unbalanced quotes": ('What does "Travel Policy say about the hotel cap?', SIMPLE, "", NO_CONTEXT, "unbalanced"),
    "asks about nothing": ('What does "Travel Policy" say?', SIMPLE, "", NO_CONTEXT, "no subject"),
}


@pytest.mark.parametrize("question, question_type, topic, context, because", REJECTED.values(), ids=list(REJECTED))
def test_questions_a_reviewer_would_throw_out_are_rejected_with_a_reason(
    question, question_type, topic, context, because
):
    verdict = assess(question, question_type, topic, context)

    assert verdict.score == 0.0
    assert verdict.problem and because in verdict.problem


def test_a_section_name_is_a_bad_topic_only_for_an_unanswerable_question():
    # Asking what the "History" section says is fine; asking for a fact "about History" as a thing is not.
    sections = QualityContext(section_names=frozenset({"history"}))
    question = 'What does the "Sources" section of "Town Guide" say about History?'

    assert assess(question, SIMPLE, "History", sections).problem is None
    assert "section" in assess(question, UNANSWERABLE, "History", sections).problem


# --- assess: questions a reviewer would keep ---------------------------------------------------------

KEPT = {
    "a section question with a real topic": (
        'What does the "Leave" section of "Staff Handbook" say about the annual leave allowance?',
        SIMPLE,
        "the annual leave allowance",
        HANDBOOK,
    ),
    "an absent fact about a named building": (
        "In which year was Shepperton Church built?",
        UNANSWERABLE,
        "Shepperton Church",
        QualityContext(source="Shepperton Church stands by the river."),
    ),
    "an LLM question with no declared topic": (
        "How many days of annual leave do new employees get?",
        SIMPLE,
        "",
        HANDBOOK,
    ),
    "a lead-in before the question word": (
        'According to "Staff Handbook", how many days of leave do new staff get?',
        SIMPLE,
        "",
        NO_CONTEXT,
    ),
    "a preposition before the question word": (
        "In which month do new employees start their probation?",
        SIMPLE,
        "",
        NO_CONTEXT,
    ),
    "an auxiliary opening a yes/no question": (
        "Can unused annual leave be carried over to the next year?",
        SIMPLE,
        "",
        NO_CONTEXT,
    ),
}


@pytest.mark.parametrize("question, question_type, topic, context", KEPT.values(), ids=list(KEPT))
def test_questions_a_reviewer_would_keep_get_a_score(question, question_type, topic, context):
    verdict = assess(question, question_type, topic, context)

    assert verdict.problem is None
    assert 0.0 < verdict.score <= 1.0


def test_a_question_ending_in_a_preposition_is_kept():
    verdict = assess("Who is the report addressed to?", SIMPLE, "", HANDBOOK)

    assert verdict.problem is None and verdict.score > 0


@pytest.mark.parametrize(
    "question, question_type, source",
    [
        (
            "What was the total budget spent on forklift certificates last year?",
            UNANSWERABLE,
            "A forklift certificate is valid for 3 years and must be renewed by passing a practical test.",
        ),
        (
            'What does the "Leave" section say about holiday pay for part-time staff?',
            SIMPLE,
            "Part-time staff receive a pro rata holiday allowance based on their contracted hours.",
        ),
    ],
)
def test_an_llm_topic_in_its_own_words_is_not_a_word_cut_short(question, question_type, source):
    verdict = assess(question, question_type, "", QualityContext(source=source))

    assert verdict.problem is None, verdict.problem


def test_a_long_fill_in_the_blank_scores_lower_than_a_short_plain_question():
    blank = (
        'According to "Staff Handbook", what value fills the blank in "New employees who join the company after '
        "the first of April receive a pro rata share of the annual leave allowance, which is ____ in their "
        'first calendar year of employment with us."?'
    )
    plain = "How many days of annual leave do new employees get?"

    long_blank, short_plain = assess(blank, SIMPLE), assess(plain, SIMPLE)

    assert long_blank.problem is None and short_plain.problem is None
    assert 0.0 < long_blank.score < short_plain.score
    assert long_blank.notes and not short_plain.notes  # the penalties say what lowered the score


def test_a_one_word_topic_scores_lower_than_a_longer_one():
    one_word = assess('What does "Staff Handbook" say about holidays?', SIMPLE, "holidays")
    longer = assess('What does "Staff Handbook" say about public holidays?', SIMPLE, "public holidays")

    assert one_word.problem is None and longer.problem is None
    assert one_word.score < longer.score


@pytest.mark.parametrize("question", ["", "   ", "?", "\x00\x01?", "What " * 200 + "?", 12345, None])
def test_odd_input_is_a_rejection_not_a_traceback(question):
    verdict = assess(question, SIMPLE)

    assert verdict.score == 0.0 and verdict.problem


# --- phrase_problem --------------------------------------------------------------------------------

SOURCE = (
    "The board agreed the improvement work for 2021. The town council approved the annual leave allowance of 25 days."
)
SECTIONS = frozenset({"history", "sources"})

BAD_PHRASES = {
    "There": "pronoun",
    "it": "pronoun",
    "the guide": "unnamed",
    "the board": "unnamed",
    "TIP: When observing tests it": "label",
    "When observing tests": "clause",
    "All staff": "quantifier",
    "this policy": "points back",
    "every team that": "quantifier",
    "the news that the Martians": "that",
    "connection between": "trails off",
    "a quick way": "too general",
    "improvement w": "cut short",
    "improvement wo": "cut short",
    "August 2015": "August 2015",
    "History": "section",
    "Chapter 3": "section",
    "Inawelfarestate,howshallwedeal": "run-together",
    "infor- mation": "broken",
    "Manufacturing 5 , 300 13": "Manufacturing",
    "the cost of the new roads built by the town council in the last ten years": "too long",
    "": "empty",
}

# Refusals of the phrases that cut terms out of longer text or out of badly extracted PDFs leave behind.
CUT_OR_BROKEN_PHRASES = {
    "a little black": "ends in an adjective",  # cut from "a little black dress"
    "remain consistent": "ends in an adjective or a verb",
    "a sentence write": "or a verb",  # cut from a clause
    "the following test": "points back",
    "the same rule": "points back",
    "an other rule": "points back",
    "improvement wo": "a word cut short or broken ('wo')",
    "Martia ns": "a word cut short or broken ('ns')",
    "Ham\u2014people": "run together by a dash",  # em dash
    "Ham\u2013people": "run together by a dash",  # en dash
    "\u201eannual leave": "odd characters",
    "\u201fannual leave": "odd characters",
    "the annual\u200b leave": "odd characters",  # zero-width space
    "the annual leave\ufeff": "odd characters",
    "the re\ufffdport": "odd characters",  # the replacement character of a failed decode
}


@pytest.mark.parametrize(
    "phrase, because", CUT_OR_BROKEN_PHRASES.items(), ids=[ascii(p) for p in CUT_OR_BROKEN_PHRASES]
)
def test_phrases_cut_from_longer_text_or_broken_in_extraction_are_named(phrase, because):
    problem = phrase_problem(phrase)

    assert problem and because in problem


@pytest.mark.parametrize(
    "phrase, because", CUT_OR_BROKEN_PHRASES.items(), ids=[ascii(p) for p in CUT_OR_BROKEN_PHRASES]
)
def test_a_cut_or_broken_topic_rejects_the_question(phrase, because):
    # The quality stage applies the same refusals to a topic the generator declared.
    verdict = assess(f"In which year was {phrase} introduced?", UNANSWERABLE, phrase)

    assert verdict.score == 0.0 and because in verdict.problem


# The near misses of each refusal: an adjective before the head, an English two-letter word, an
# abbreviation in capitals, a hyphen (not a dash), a modifier that does not point anywhere.
@pytest.mark.parametrize(
    "phrase",
    [
        "the black cab",
        "an ox cart",
        "the UK office",
        "the follow-up meeting",
        "well-being checks",
        "the annual leave allowance",
        "the Natural History Museum",
        "Edmonds Community College",
    ],
)
def test_near_misses_of_the_refusals_pass(phrase):
    assert phrase_problem(phrase) is None


@pytest.mark.parametrize("phrase, because", BAD_PHRASES.items(), ids=[p or "empty" for p in BAD_PHRASES])
def test_phrases_that_do_not_stand_on_their_own_are_named(phrase, because):
    problem = phrase_problem(phrase, SOURCE, SECTIONS)

    assert problem and because in problem


@pytest.mark.parametrize(
    "phrase",
    [
        "the town council",
        "improvement work",
        "the annual leave allowance",
        "Shepperton Church",
        "Data Governance Council",
    ],
)
def test_noun_phrases_that_stand_on_their_own_pass(phrase):
    source = f"{SOURCE} Shepperton Church and the Data Governance Council are named here."

    assert phrase_problem(phrase, source, SECTIONS) is None


def test_a_cut_word_is_caught_only_when_the_source_is_given():
    # "wor" is a word of its own shape; only the source's "work" shows it was cut short.
    assert phrase_problem("improvement wor") is None
    assert "cut short ('wor')" in phrase_problem("improvement wor", SOURCE)


def test_a_phrase_at_the_end_of_a_sentence_is_not_cut_short():
    sentence = "The grant was spent by Edmonds Community College."

    assert phrase_problem("the annual leave allowance", "New employees get the annual leave allowance.") is None
    assert topic_phrases(sentence) == ["Edmonds Community College"]


def test_a_topic_read_back_out_of_a_question_may_be_long_but_not_broken():
    # whole=False: a finished question's topic may rightly hold a comma or run long; word-level rules still apply.
    long_topic = "the number of days, weeks or months that request logs of the RouteWise API are kept"

    assert "too long" in phrase_problem(long_topic)
    assert phrase_problem(long_topic, whole=False) is None
    assert "run-together" in phrase_problem("Inawelfarestatehowshallwedeal logs", whole=False)


@pytest.mark.parametrize("phrase", [42, "   ", ",;", '"', "?!", "\n\t"])
def test_odd_phrases_give_a_reason_not_a_traceback(phrase):
    assert phrase_problem(phrase)


# --- is_date ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "August 2015",
        "12 March 2021",
        "March 12, 2021",
        "2021-03-12",
        "12/03/2021",
        "Q3 2020",
        "1998",
        "2019-20",
        "Sept. 2020",
        " August 2015. ",
    ],
)
def test_dates_are_dates(text):
    assert is_date(text)


@pytest.mark.parametrize(
    "text",
    [
        "Shepperton Church",
        "15 days",
        "30 years",
        "12345",
        "Section 3",
        "Mayfield",
        "the August report",
        "version 2.0",
        "",
    ],
)
def test_things_that_are_not_dates(text):
    assert not is_date(text)


# --- topic_phrases and kind_of -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence, topics",
    [
        ("Trains to Chobham Road were cancelled.", ["Chobham Road"]),
        ("Staff of the Leeds office work shorter hours in summer.", ["the Leeds office"]),
        # A name takes "the" where the text gives it, and may run to three capitalised words.
        (
            "Pupils of Edmonds Community College visit the Natural History Museum.",
            ["Edmonds Community College", "the Natural History Museum"],
        ),
        ("The grant was spent by Surrey County Council.", ["Surrey County Council"]),  # 'County' modifies 'Council'
        # A direction is not a name.
        ("Drovers crossed the Londonward country in spring.", []),
        ("Drovers crossed the Northwards country in spring.", []),
        # The first word of a sentence is capitalised whatever it is.
        ("Chobham Road was closed for repairs in May.", []),
    ],
)
def test_topic_phrases_are_names_of_a_known_kind_of_thing(sentence, topics):
    assert topic_phrases(sentence) == topics


@pytest.mark.parametrize(
    "sentence",
    [
        # Common nouns, with or without modifiers: asked on its own, each leaves a reader asking "which one?".
        "The town council spent the money on new cycle lanes.",
        "Staff of the town council spent the money on new cycle lanes.",
        "The school board met twice in the spring.",
        "The council spent the grant on roads.",
        "The specific department answers within a week.",
        "Every town has a library and a school.",
        "Nothing here names a kind of thing we know.",
        "",
    ],
)
def test_common_noun_phrases_are_not_topics(sentence):
    assert topic_phrases(sentence) == []


def test_a_common_noun_becomes_a_topic_only_as_part_of_a_name():
    # The same head, "council": only the named one identifies a council to someone who has not read the text.
    assert topic_phrases("The grant was spent by the town council.") == []
    assert topic_phrases("The grant was spent by the Shepperton town council.") == []  # a stray lowercase word
    assert topic_phrases("The grant was spent by Shepperton Parish Council.") == ["Shepperton Parish Council"]


def test_every_topic_phrase_stands_on_its_own_and_has_frames():
    sentence = "The town council and the Leeds office use the shipment tracking system on the Grand Union canal."

    phrases = topic_phrases(sentence)

    assert phrases
    for phrase in phrases:
        assert phrase_problem(phrase, sentence) is None
        assert kind_of(phrase) and frames_for(phrase)
        assert phrase.removeprefix("the ").lower() in sentence.lower()


@pytest.mark.parametrize(
    "phrase, kind",
    [
        ("the town council", "organisation"),
        ("the city libraries", "organisation"),
        ("the booking system", "method"),
        ("the booking systems", "method"),
        ("the cycling strategy", "programme"),
        ("Manchester City", "settlement"),
        ("Shepperton Church", "building"),
        ("the River Wey", None),
        ("Grand Union canal", "route"),
        ("the staff handbook", "work"),
        ("the annual budget", None),
        ("", None),
        ("Chobham Road", "route"),
        ("the Natural History Museum", "organisation"),
        ("Epsom Common", "landmark"),
        # Too general to have facts of their own: a guide may be a person, an approach is anything.
        ("the Lakeland guide", None),
        ("the Montessori approach", None),
    ],
)
def test_kind_of_reads_the_head_noun(phrase, kind):
    assert kind_of(phrase) == kind
    assert bool(frames_for(phrase)) == (kind is not None)


def test_every_frame_of_a_kind_asks_a_well_formed_question():
    # One topic per kind: what the generator fills in must pass the quality stage itself.
    for topic in [
        "the Leeds office",
        "the Countryside Stewardship scheme",
        "the Tracker system",
        "Manchester City",
        "Shepperton Church",
        "Epsom Common",
        "Chobham Road",
        "the Strand Magazine",
    ]:
        for frame in frames_for(topic):
            question = frame.question.format(topic=topic)
            verdict = assess(question, UNANSWERABLE, topic)
            assert verdict.problem is None, (question, verdict.problem)
            assert frame.answer_words


# --- found by a hostile read of the change: good questions an LLM writes are kept ---------------------


@pytest.mark.parametrize(
    "question",
    [
        "If an employee works 50 hours in a week, how much overtime is paid?",
        "After the merger, which team owns the billing system?",
        "Suppose a trip lasts 3 days. How much is the meal allowance?",
        "Wie viele Tage Urlaub bekommt ein Mitarbeiter?",
        "What is a mortgage?",
        "What is vitamin D?",
        "What does the text say about Section 230?",
        "What does the memo say about Q3 2021?",
        "Where is Baden-Baden located?",
    ],
)
def test_good_llm_questions_are_kept(question):
    verdict = assess(question, SIMPLE)

    assert verdict.problem is None and verdict.score > 0


def test_an_llm_topic_that_paraphrases_the_source_is_not_a_cut_word():
    context = QualityContext(source="Contact information for the payroll team is on the intranet.")

    assert assess("What does the handbook say about contact info?", SIMPLE, "", context).problem is None
    assert (
        "cut short"
        in assess(
            "What does the handbook say about contact inf?",
            SIMPLE,
            "improvement inf",
            QualityContext(source="improvement information"),
        ).problem
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "We visited the Bank of England Museum today.",
        "Ships paid dues to the Port of London Authority.",
        "Students of the London School of Economics Library met there.",
        "He moved to New York City in 1900.",
    ],
)
def test_a_topic_is_never_a_name_cut_short(sentence):
    assert not any(
        phrase in ("England Museum", "London Authority", "the London School", "York City")
        for phrase in topic_phrases(sentence)
    )


# --- found by a second hostile read ----------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Qui a fondé l'entreprise en 1998 ?",
        "Hoeveel mensen wonen in Amsterdam?",
        "¿Quién ayudó a María con el informe?",
        "公司去年有多少名员工？",
        "Which of the two plans is the cheaper one?",
        "What is the GDPR and which authority enforces it?",
        "Who must approve expense claims before finance pays them?",
        "What's the notice period for managers?",
        "Approximately how many staff work in the Leeds office?",
        "According to the report what is the annual budget?",
    ],
)
def test_more_good_questions_are_kept(question):
    verdict = assess(question, SIMPLE)

    assert verdict.problem is None, verdict.problem


@pytest.mark.parametrize(
    "question",
    [
        "Improvement w?",
        "Revenue 2020?",
        "Total ____ 4.5 3.2 1.1?",
        "According to the guide, what is There?",
        "According to the handbook, what is the guide?",
        "What is true of the guide?",
        "How do the guide and the memo each describe improvement w?",
        "What does the guide say regarding improvement w?",
        "The council approved the plan, which was later revised?",
        'What does "Grammar Matters" say about the third option?',
        'According to the "12 March 2021" section of "Harbour Report", what is true of the hotel cap?',
        'What does the "iv" section of "Harbour Report" say about the hotel cap?',
    ],
)
def test_more_faulty_questions_are_rejected(question):
    assert assess(question, SIMPLE).problem


def test_a_name_joined_by_an_ampersand_is_never_cut():
    assert "the Gamble factory" not in topic_phrases("He worked at the Procter & Gamble factory in Surrey.")
