"""The reference candidate shipped for the demo: embedding top-k retrieval plus an extractive answer.

It is a real, simple RAG pipeline to evaluate, not a model of good practice: the answer is the
retrieved sentence closest to the question.
"""

from __future__ import annotations

import numpy as np

from rag_eval_pipeline.core.embeddings import Embedder
from rag_eval_pipeline.core.text import split_sentences


class ReferenceCandidate:
    def __init__(self, chunk_ids: list[str], chunk_texts: list[str], embedder: Embedder, top_k: int = 5):
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        self.chunk_ids, self.chunk_texts = list(chunk_ids), list(chunk_texts)
        self.embedder, self.top_k = embedder, top_k
        self.chunk_vectors = embedder.embed(self.chunk_texts)

    def retrieve_many(self, questions: list[str]) -> list[list[int]]:
        """Top-k chunk indexes per question, the questions embedded in one batch."""
        return [self._top_k(vector) for vector in self.embedder.embed(list(questions))] if questions else []

    def __call__(self, question: str) -> dict:
        query = self.embedder.embed([question])[0]
        contexts = [{"id": self.chunk_ids[i], "text": self.chunk_texts[i]} for i in self._top_k(query)]
        sentences = [s for c in contexts for s in split_sentences(c["text"])]
        if not sentences:
            return {"answer": "I don't know.", "contexts": contexts}
        best = int(np.argmax(self.embedder.embed(sentences) @ query))
        return {"answer": sentences[best], "contexts": contexts}

    def _top_k(self, query: np.ndarray) -> list[int]:
        scores = self.chunk_vectors @ query
        return [int(i) for i in np.argsort(-scores, kind="stable")[: self.top_k]]
