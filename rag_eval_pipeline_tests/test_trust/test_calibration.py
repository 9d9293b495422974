"""calibrate / load_calibration / describe with a scripted judge whose faithfulness is known in advance, on
the local warehouse; and read_labels_file on CSV, JSONL and Parquet."""

import json
import math

import pandas as pd
import pytest

from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judgement import Judgement, Verdict
from rag_eval_pipeline.core.trust.agreement import agreement
from rag_eval_pipeline.evaluation import calibration as cal
from rag_eval_pipeline.evaluation.calibration import (
    UNCALIBRATED_NOTE,
    JudgeIdentity,
    LabelledItem,
    calibrate,
    describe,
    load_calibration,
    save_calibration,
)
from rag_eval_pipeline.evaluation.labels import label_key, label_rows, read_labels, store_labels
from rag_eval_pipeline.stores.local import Warehouse

FAITHFULNESS = ("faithfulness",)


class ScriptedJudge:
    """Faithfulness = the share of 'yes' words in the answer; an empty answer makes no statement."""

    name = "scripted-v1"

    def __init__(self, on_judge=None):
        self.on_judge = on_judge  # called once per judge_many, before judging

    def judge_many(self, items, needs):
        if self.on_judge:
            self.on_judge()
        return [Judgement(answer_statements=[Verdict(w, int(w == "yes")) for w in i.answer.split()]) for i in items]


def _entry(number: int, answer: str, label: float, pair_id: str = "") -> LabelledItem:
    item = EvalItem(
        qa_id=str(number), question=f"question {number}?", answer=answer, contexts=[{"id": "c", "text": "x"}]
    )
    return LabelledItem(item, {"faithfulness": label}, pair_id)


# faithfulness 1, 0.5, 0, 1, 0 and one unmeasured; labels 1, 1, 0, 1, 0, 1
ENTRIES = [
    _entry(1, "yes yes", 1, "p1"),
    _entry(2, "yes no", 1, "p2"),
    _entry(3, "no no", 0, "p1"),
    _entry(4, "yes", 1),
    _entry(5, "no", 0, "p2"),
    _entry(6, "", 1),
]
IDENTITY = JudgeIdentity("scripted-v1", 5, FAITHFULNESS)


def _calibrated(entries=ENTRIES):
    return calibrate(entries, ScriptedJudge(), embedder=None, identity=IDENTITY)


def test_calibrate_scores_the_labelled_items_and_counts_the_unmeasured_ones_with_their_reason():
    calibration = _calibrated()
    (row,) = calibration.summary.to_dict("records")
    expected = agreement([1, 0.5, 0, 1, 0], [1, 1, 0, 1, 0], ["p1", "p2", "p1", "", "p2"])
    assert (row["n_labels"], row["n_measured"], row["n_unmeasured"]) == (6, 5, 1)
    assert row["unmeasured_reasons"] == "1 the answer makes no statement to verify"
    assert row["kappa"] == expected.kappa.value == 1.0  # 0.5 reads as good, and its label is good
    assert row["roc_auc"] == expected.roc_auc.value and row["pairwise"] == 1.0 and row["n_pairs"] == 2
    assert (row["judge"], row["k"], row["metrics"], row["identity"]) == (
        "scripted-v1",
        5,
        "faithfulness",
        IDENTITY.key(),
    )
    items = calibration.items
    assert list(items.columns) == ["label_key", "metric", "score", "label", "pair_id"]
    assert items["score"].tolist() == [1.0, 0.5, 0.0, 1.0, 0.0]  # the unmeasured item is not there
    assert items["label_key"].tolist()[0] == label_key(ENTRIES[0].item)


def test_an_undefined_figure_is_na_with_its_note_never_nan():
    calibration = _calibrated([_entry(1, "yes", 1), _entry(2, "no", 1)])
    summary = calibration.summary
    assert summary["roc_auc"].isna().all() and "one class only" in summary["roc_auc_note"].iloc[0]
    floats = summary.select_dtypes("number").to_numpy(dtype=object).ravel()
    assert not [v for v in floats if isinstance(v, float) and math.isnan(v)]


def test_calibrate_refuses_another_judges_identity_and_labels_outside_its_metrics():
    with pytest.raises(ValueError, match="identity names judge 'other'"):
        calibrate(ENTRIES, ScriptedJudge(), None, JudgeIdentity("other", 5, FAITHFULNESS))
    relevance = LabelledItem(ENTRIES[0].item, {"answer_relevance": 1.0})
    with pytest.raises(ValueError, match="answer_relevance, not among the metrics scored"):
        calibrate([relevance], ScriptedJudge(), None, IDENTITY)


def test_the_identity_key_is_stable_and_covers_judge_k_and_the_metric_set():
    same = JudgeIdentity("scripted-v1", 5, ("faithfulness", "faithfulness"))
    assert same == IDENTITY and same.key() == IDENTITY.key()
    assert IDENTITY.key() == "95c0fd9984103f7c"  # a key must not change between releases: stored calibrations use it
    assert JudgeIdentity("m", 5, ("b", "a")).key() == JudgeIdentity("m", 5, ("a", "b")).key()
    others = [
        JudgeIdentity("scripted-v2", 5, FAITHFULNESS),
        JudgeIdentity("scripted-v1", 3, FAITHFULNESS),
        JudgeIdentity("scripted-v1", 5, ("faithfulness", "answer_relevance")),
    ]
    assert len({IDENTITY.key(), *(o.key() for o in others)}) == 4


def test_a_stored_calibration_is_found_by_its_identity_only(tmp_path):
    store = Warehouse(tmp_path)
    calibration = _calibrated()
    save_calibration(store, "acme", calibration)
    loaded = load_calibration(store, "acme", JudgeIdentity("scripted-v1", 5, FAITHFULNESS))
    assert loaded is not None
    pd.testing.assert_frame_equal(loaded.summary, calibration.summary)
    pd.testing.assert_frame_equal(loaded.items, calibration.items)
    assert load_calibration(store, "acme", JudgeIdentity("scripted-v2", 5, FAITHFULNESS)) is None
    assert load_calibration(store, "acme", JudgeIdentity("scripted-v1", 3, FAITHFULNESS)) is None
    assert load_calibration(store, "globex", IDENTITY) is None


def test_a_table_stored_under_the_key_by_another_identity_is_not_taken_for_it(tmp_path):
    """A key is 16 hex digits of a hash: the stored fields are compared as well."""
    store = Warehouse(tmp_path)
    calibration = _calibrated()
    forged = calibration.summary.assign(judge="scripted-v0")
    store.write_tenant_table("acme", IDENTITY.items_table, calibration.items)
    store.write_tenant_table("acme", IDENTITY.table, forged)
    assert load_calibration(store, "acme", IDENTITY) is None


def test_describe_says_how_many_labels_and_the_intervals():
    row = _calibrated().row("faithfulness")
    assert row is not None
    text = describe(row)
    assert text.startswith("calibrated on 5 of 6 labels (1 unmeasured): kappa 1.00 [")
    assert "ROC-AUC 1.00 [" in text
    assert describe(None) == UNCALIBRATED_NOTE == "uncalibrated (no labels of yours were scored by this judge)"
    one_class = _calibrated([_entry(1, "yes", 1), _entry(2, "no", 1)]).row("faithfulness")
    assert "ROC-AUC n/a (the labels hold one class only (every label is good))" in describe(one_class)
    nothing = _calibrated([_entry(1, "", 1)]).row("faithfulness")
    assert describe(nothing).startswith("uncalibrated (none of its 1 labels")


def _store(store, tenant, entries, source):
    rows = [r for e in entries for r in label_rows(e.item, e.labels, source, pair_id=e.pair_id)]
    store_labels(store, tenant, rows)


def test_calibrate_tenant_scores_the_stored_labels_with_their_pair_ids(tmp_path):
    store = Warehouse(tmp_path)
    _store(store, "acme", ENTRIES, "a.jsonl")
    calibration = cal.calibrate_tenant(store, "acme", ScriptedJudge(), None, IDENTITY)
    assert calibration.row("faithfulness")["n_pairs"] == 2
    stored = load_calibration(store, "acme", IDENTITY)
    assert stored is not None and stored.summary["labels_digest"].iloc[0] == cal.labels_digest(
        read_labels(store, "acme")
    )


def test_labels_stored_while_the_judge_scores_are_scored_before_the_calibration_is_stored(tmp_path):
    store = Warehouse(tmp_path)
    _store(store, "acme", ENTRIES[:3], "first.jsonl")
    late = [_entry(7, "yes", 1), _entry(8, "no", 0)]
    calls = []

    def another_import_meanwhile():
        calls.append(1)
        if len(calls) == 1:
            _store(store, "acme", late, "second.jsonl")

    cal.calibrate_tenant(store, "acme", ScriptedJudge(another_import_meanwhile), None, IDENTITY)
    stored = load_calibration(store, "acme", IDENTITY)
    assert len(calls) == 2  # scored again on the five labels
    assert stored is not None and stored.row("faithfulness")["n_labels"] == 5


def test_labels_file_columns_rows_and_empty_cells(tmp_path):
    rows = [
        {"user_input": "q1?", "retrieved_contexts": json.dumps(["c"]), "response": "a", "faithfulness_label": "1",
         "answer_relevance_label": "", "pair_id": "p"},
        {"user_input": "q2?", "retrieved_contexts": json.dumps(["c"]), "response": "b", "faithfulness_label": "0.25",
         "answer_relevance_label": "0", "pair_id": ""},
        {"user_input": "q3?", "retrieved_contexts": json.dumps(["c"]), "response": "c", "faithfulness_label": "",
         "answer_relevance_label": "", "pair_id": ""},
    ]  # fmt: skip
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    labelled = cal.read_labels_file(path)
    assert [(e.item.question, e.labels, e.pair_id) for e in labelled] == [
        ("q1?", {"faithfulness": 1.0}, "p"),
        ("q2?", {"faithfulness": 0.25, "answer_relevance": 0.0}, ""),
    ]  # the third row has no label: not a labelled item
    parquet = tmp_path / "labels.parquet"
    pd.DataFrame(
        {"question": ["q?", "r?"], "contexts": [["c"], ["c"]], "answer": ["a", "b"], "faithfulness_label": [1.0, None]}
    ).to_parquet(parquet)
    assert [e.labels for e in cal.read_labels_file(parquet)] == [{"faithfulness": 1.0}]
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text(json.dumps({"question": "q?", "answer": "a", "faithfulness_label": True}) + "\n")
    assert cal.read_labels_file(jsonl)[0].labels == {"faithfulness": 1.0}


@pytest.mark.parametrize(
    "record, message",
    [
        ({"question": "q?", "answer": "a", "bleu_label": 1}, "column bleu_label: unknown metric 'bleu'"),
        ({"question": "q?", "answer": "a", "mrr_label": 1}, "mrr is computed without the judge"),
        ({"question": "q?", "answer": "a", "faithfulness_label": 2}, "line 2, column faithfulness_label: 2 is outside [0, 1]"),
        ({"question": "q?", "answer": "a", "faithfulness_label": "yes"}, "line 2, column faithfulness_label: 'yes' is not a number"),
        ({"question": "q?", "answer": "a", "faithfulness_label": [1]}, "line 2, column faithfulness_label: [1] is not a number"),
        ({"question": "", "answer": "a", "faithfulness_label": 1}, "line 2 (id 2): missing question"),
    ],
)  # fmt: skip
def test_a_bad_labels_file_is_refused_naming_the_row_and_column(tmp_path, record, message):
    path = tmp_path / "labels.jsonl"
    good = {"question": "q0?", "answer": "a", "faithfulness_label": 1}
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ValueError) as error:
        cal.read_labels_file(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_labels_file_without_a_label_column_is_refused(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"question": "q?", "answer": "a", "label": 1}) + "\n")
    with pytest.raises(ValueError, match="has no label column: name one <metric>_label, e.g. faithfulness_label"):
        cal.read_labels_file(path)


def test_a_calibration_whose_labels_changed_since_is_shown_as_stale_and_never_corrects_the_judge(tmp_path):
    from rag_eval_pipeline.reporting.trust import STALE, judge_trust

    store = Warehouse(tmp_path)
    entries = [_entry(n, "yes" if n % 2 else "no", n % 2) for n in range(12)]
    _store(store, "acme", entries, "a.jsonl")
    cal.calibrate_tenant(store, "acme", ScriptedJudge(), None, IDENTITY)
    scores = pd.DataFrame({"qa_id": ["q"], "metric": ["faithfulness"], "judge": ["scripted-v1"], "k": [5]})
    fresh = judge_trust(store, "acme", scores)
    assert len(fresh.pairs("faithfulness")) == 12 and fresh.phrase("faithfulness").startswith("calibrated")

    _store(store, "acme", [_entry(1, "yes", 0)], "b.jsonl")  # a person changed a label
    stale = judge_trust(store, "acme", scores)
    assert stale.phrase("faithfulness") == STALE and stale.pairs("faithfulness").empty
