"""The reference candidate shipped for the demo: embedding top-k retrieval plus an extractive answer.

It is a real, simple RAG pipeline to evaluate, not a model of good practice: the answer is the
retrieved sentence closest to the question.
"""

from __future__ import annotations

import numpy as np

from rag_eval_pipeline.core import tracing
from rag_eval_pipeline.core.embeddings import MODEL_NAME, Embedder
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
        """Each stage under a span of its own (core/tracing.py): the query's embedding, the retrieval with the
        ids and ranks returned, the extractive answer."""
        with tracing.span("embed query", tracing.EMBEDDING, {"embedding.model_name": MODEL_NAME}):
            query = self.embedder.embed([question])[0]
        with tracing.span("retrieve", tracing.RETRIEVER, {"input.value": question}) as retrieval:
            ranked = self._top_k(query)
            contexts = [{"id": self.chunk_ids[i], "text": self.chunk_texts[i]} for i in ranked]
            tracing.set_attributes(
                retrieval, _documents(contexts, [float(self.chunk_vectors[i] @ query) for i in ranked])
            )
        with tracing.span("answer", tracing.CHAIN, {"input.value": question}) as answering:
            answer = self._answer(query, contexts)
            tracing.set_attributes(answering, {"output.value": answer})
        return {"answer": answer, "contexts": contexts}

    def _answer(self, query: np.ndarray, contexts: list[dict]) -> str:
        sentences = [s for c in contexts for s in split_sentences(c["text"])]
        if not sentences:
            return "I don't know."
        return sentences[int(np.argmax(self.embedder.embed(sentences) @ query))]

    def _top_k(self, query: np.ndarray) -> list[int]:
        scores = self.chunk_vectors @ query
        return [int(i) for i in np.argsort(-scores, kind="stable")[: self.top_k]]


def _documents(contexts: list[dict], scores: list[float]) -> dict:
    """The retrieved chunks as OpenInference's retrieval.documents attributes, in rank order."""
    attributes = {}
    for rank, (context, score) in enumerate(zip(contexts, scores)):
        prefix = f"retrieval.documents.{rank}.document"
        attributes.update(
            {f"{prefix}.id": context["id"], f"{prefix}.score": round(score, 6), f"{prefix}.content": context["text"]}
        )
    return attributes
