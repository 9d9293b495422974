"""The offline judge abstains where its signals are blind: long answers, paraphrases, other languages.

Each abstention is a Failure the metric turns into `unmeasured` with the judge's reason (a JUDGE cause, so
it counts against coverage); where the judge is strong (short factual answers) it still scores. The
thresholds and the measurement behind them: benchmarks/judge_abstention.py.
"""

from __future__ import annotations

import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judge import DEFAULT_ABSTENTION, OfflineJudge
from rag_eval_pipeline.core.judging.results import (
    ABSTAINS_LONG_ANSWER,
    ABSTAINS_NOT_ENGLISH,
    ABSTAINS_PARAPHRASE,
    JUDGE,
    OK,
    UNMEASURED,
    is_abstention,
    unmeasured_cause,
)
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline.core.text import looks_non_english, word_count

LOGS = "RouteWise API request logs are retained for 90 days and then deleted automatically."
SANDBOX = "The sandbox is limited to 60 requests per minute per client."
QUESTION = "How long are RouteWise API request logs retained?"
CONTEXTS = [{"id": "api.md#0", "text": f"{LOGS} {SANDBOX}"}]

SHORT = "RouteWise API request logs are retained for 90 days."
SHORT_WRONG = "RouteWise API request logs are retained for 30 days."
LONG = f"{LOGS} {SANDBOX} Both limits apply to every client of the RouteWise API, in the sandbox as in production."
# The same fact in other words: nothing in it is a wrong number, name or negation, yet few words match.
PARAPHRASED = (
    "Records of calls made to the routing interface are kept for a quarter of a year, then erased without "
    "anyone doing anything."
)
PARAPHRASED_WRONG_NUMBER = (
    "Records of calls made to the routing interface are kept for three months, then erased without anyone "
    "doing anything."
)
GERMAN = "Die Protokolle der RouteWise API werden 90 Tage lang aufbewahrt und danach automatisch gelöscht."
RUSSIAN = "Журналы запросов RouteWise API хранятся 90 дней, затем удаляются автоматически."

LONG_REASON = ABSTAINS_LONG_ANSWER.format(words=DEFAULT_ABSTENTION.max_answer_words)
PARAPHRASE_REASON = ABSTAINS_PARAPHRASE.format(share=DEFAULT_ABSTENTION.min_anchored_share)
ANSWER_NOT_ENGLISH = ABSTAINS_NOT_ENGLISH.format(field="answer")


def scored(answer: str, judge, question: str = QUESTION, contexts=CONTEXTS) -> dict:
    """Every metric of one item, through score_items as the metric_scores asset runs it, by metric name."""
    item = EvalItem("qa-1", question, answer, [dict(c) for c in contexts], LOGS, ["api.md#0"])
    results, _ = score_items([item], judge, judge.embedder)
    return {result.metric: result for result in results[0]}


@pytest.fixture(scope="module")
def todays_judge(embedder):
    """The judge without abstention: what offline-support-v2 scored."""
    return OfflineJudge(embedder, abstention=None)


def test_the_abstaining_judge_has_a_new_name(offline_judge, todays_judge):
    # Its scores differ from v2's, so a baseline scored by v2 is re-scored, never compared as is.
    assert offline_judge.name == "offline-support-v3"
    assert todays_judge.name == "offline-support-v2"


@pytest.mark.parametrize("answer, expected", [(SHORT, 1.0), (SHORT_WRONG, 0.0)])
def test_a_short_factual_answer_is_still_scored(offline_judge, answer, expected):
    results = scored(answer, offline_judge)

    assert results["faithfulness"].status == OK and results["faithfulness"].score == expected
    assert not any(is_abstention(r.reason) for r in results.values())


def test_a_long_answer_leaves_faithfulness_unmeasured_with_the_reason(offline_judge, todays_judge):
    assert word_count(LONG) > DEFAULT_ABSTENTION.max_answer_words
    assert scored(LONG, todays_judge)["faithfulness"].status == OK  # today it gives a confident score

    results = scored(LONG, offline_judge)

    assert results["faithfulness"].status == UNMEASURED and results["faithfulness"].score is None
    assert results["faithfulness"].reason == LONG_REASON
    assert "longer than 30 words" in LONG_REASON and "use the LLM judge" in LONG_REASON
    # Length blinds the statement checks only: relevance was not measured to fall off with length.
    assert results["answer_relevance"].status == OK


def test_a_paraphrased_answer_leaves_faithfulness_unmeasured_with_the_reason(offline_judge, todays_judge):
    assert scored(PARAPHRASED, todays_judge)["faithfulness"].score == 0.0  # a faithful answer, scored as false

    results = scored(PARAPHRASED, offline_judge)

    assert results["faithfulness"].status == UNMEASURED
    assert results["faithfulness"].reason == PARAPHRASE_REASON
    assert results["answer_relevance"].status == OK


def test_a_paraphrase_with_a_wrong_number_is_still_judged(offline_judge):
    """A number the contexts do not hold is evidence of a changed fact, whatever the wording."""
    assert scored(PARAPHRASED_WRONG_NUMBER, offline_judge)["faithfulness"].score == 0.0


@pytest.mark.parametrize("answer", [GERMAN, RUSSIAN])
def test_a_non_english_answer_leaves_every_metric_reading_it_unmeasured(offline_judge, answer):
    results = scored(answer, offline_judge)

    for metric in ("faithfulness", "answer_relevance", "answer_correctness"):
        assert results[metric].status == UNMEASURED, metric
        assert results[metric].reason == ANSWER_NOT_ENGLISH, metric
    # The question, contexts and ground truth are English: what reads only them is still measured.
    for metric in ("context_recall", "context_precision", "contextual_relevancy", "hit_rate"):
        assert results[metric].status == OK, metric


def test_a_russian_answer_got_a_confident_score_before(todays_judge):
    # The word signals see only "RouteWise API 90": the reason to abstain rather than score.
    assert scored(RUSSIAN, todays_judge)["faithfulness"].score == 1.0


def test_non_english_contexts_blind_the_judgements_that_read_them(offline_judge):
    contexts = [{"id": "api.md#0", "text": GERMAN}]

    results = scored(SHORT, offline_judge, contexts=contexts)

    reason = ABSTAINS_NOT_ENGLISH.format(field="contexts")
    for metric in ("faithfulness", "context_recall", "context_precision", "contextual_relevancy"):
        assert results[metric].reason == reason, metric
    assert results["answer_relevance"].status == OK  # question and answer are English


@pytest.mark.parametrize("reason", [LONG_REASON, PARAPHRASE_REASON, ANSWER_NOT_ENGLISH])
def test_an_abstention_is_the_judges_doing(reason):
    """The gate counts it against coverage: not applicable would drop it silently, candidate would blame the
    candidate for the judge's blindness."""
    assert unmeasured_cause(reason) == JUDGE
    assert is_abstention(reason)


def test_the_reasons_group_in_the_report():
    # One text per kind (no item's own figures) and no "; " (the report joins reasons with it).
    for reason in (LONG_REASON, PARAPHRASE_REASON, ANSWER_NOT_ENGLISH):
        assert "; " not in reason


@pytest.mark.parametrize(
    "text",
    [
        "Die Rückerstattung wird innerhalb von 14 Tagen bearbeitet.",
        "Les remboursements sont traités dans un délai de 14 jours.",
        "¿Se reembolsa el alcohol?",
        "I rimborsi sono elaborati entro 14 giorni dalla richiesta.",
        "Возврат средств обрабатывается в течение 14 дней.",
        "退款在14天内处理。",
    ],
)
def test_text_in_another_language_is_recognised(text):
    assert looks_non_english(text)


@pytest.mark.parametrize(
    "text",
    [
        SHORT,
        "Jonathan Stark",
        "Gilbert du Motier, Marquis de Lafayette",
        "Los Angeles, Las Vegas and San Diego",
        "The café in Zürich serves crème brûlée.",
        "Tokyo (東京) is the capital of Japan.",
        "",
    ],
)
def test_english_names_and_loanwords_are_not_taken_for_another_language(text):
    assert not looks_non_english(text)
