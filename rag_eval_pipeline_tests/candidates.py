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


def hangs_for_ever(question: str) -> dict:
    while True:
        time.sleep(3600)


def i_do_not_know(question: str) -> dict:
    """The emptiest pipeline: declines every question and retrieves nothing."""
    return {"answer": "I do not know.", "contexts": []}


def exits_the_process(question: str) -> dict:
    """Ends whatever process calls it, as `os._exit` does, with status 0: nothing runs after it."""
    import os

    os._exit(0)


def exits_on_long_questions(question: str) -> dict:
    """Answers short questions, and ends its process on long ones (a crash that depends on the input)."""
    import os

    if len(question) > 60:
        os._exit(3)
    return {"answer": "A short answer.", "contexts": [{"id": "doc#0", "text": "A short answer."}]}


def prints_and_answers(question: str) -> dict:
    """Writes to stdout, as debugging code does, and answers."""
    print("candidate debug output", question)
    return {"answer": "Printed, then answered.", "contexts": []}


def exits_via_sys_exit(question: str) -> dict:
    import sys

    sys.exit(0)


def raises_with_a_lone_surrogate(question: str) -> dict:
    raise RuntimeError("index \ud800 offline")


def traces_itself(question: str) -> dict:
    """A candidate instrumented with OpenTelemetry of its own: its span must nest under its item's."""
    from opentelemetry import trace

    with trace.get_tracer("team-rag").start_as_current_span("team retrieval") as span:
        span.set_attribute("team.question", question)
        return {"answer": "Refunds take 14 days.", "contexts": [{"id": "policy#0", "text": "Refunds take 14 days."}]}
