"""Candidate RAG pipelines used by the tests, named as `module:function` like a user's would be."""

import time


def no_retrieval(question: str) -> dict:
    """A regressed pipeline: retrieves nothing and answers without grounding."""
    return {"answer": "Our records show the standard limit is 999 units for every request.", "contexts": []}


def crashes(question: str) -> dict:
    raise RuntimeError("vector store connection refused")


def hangs(question: str) -> dict:
    time.sleep(30)
    return {"answer": "late", "contexts": []}


def i_do_not_know(question: str) -> dict:
    """The emptiest pipeline: declines every question and retrieves nothing."""
    return {"answer": "I do not know.", "contexts": []}
