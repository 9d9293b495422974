"""The embedded offline QA generator: template questions from single factual sentences.

No LLM: each question is built from one declarative sentence of one chunk, whose full text is the
ground-truth answer and whose chunk is the gold context. It can honestly produce only `simple`
questions (one assertion of one chunk); the other types need a generator that can reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import pandas as pd

from rag_eval_pipeline.text import content_words, numbers, sha256, split_sentences

GENERATOR = "offline-template"
TEMPLATE_VERSION = "template-v1"

_DEFINITION = re.compile(r"^(?:The |An? )?(?P<term>[A-Z][\w'/-]*(?: [\w'/-]+){0,4}) (?:is|are) (?:the|a|an) ", re.U)
_QUANTITY = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:%|percent|days?|hours?|minutes?|seconds?|weeks?|months?|years?|ms|"
    r"milliseconds?|requests?|euros?|EUR|kg|metres?|meters?|GB|MB|employees?|people|times)\b",
    re.I,
)
_VERB = re.compile(
    r"\b(is|are|was|were|must|may|can|cannot|will|should|shall|has|have|applies|apply|requires?|owns?|"
    r"receives?|needs?|runs?|uses?|takes?|sends?|starts?|ends?|covers?|includes?|returns?|allows?)\b"
)


@dataclass(frozen=True)
class QAItem:
    qa_id: str
    question: str
    ground_truth: str
    gold_chunk_ids: list[str]
    gold_contexts: list[str]
    question_type: str
    source_cluster: int
    generator: str
    prompt_version: str
    template: str = ""
    extra: dict = field(default_factory=dict)


def generate_offline(chunks: pd.DataFrame, clusters: pd.DataFrame, titles: dict[str, str], max_items: int = 40) -> list[QAItem]:
    """Questions from the chunks of every cluster in turn, so the set spans the corpus, not its first pages."""
    table = chunks.merge(clusters[["chunk_id", "cluster_id", "membership"]], on="chunk_id")
    queues = [
        group.sort_values(["membership", "chunk_id"], ascending=[False, True]).to_dict("records")
        for _, group in sorted(table.groupby("cluster_id"), key=lambda g: (-len(g[1]), g[0]))
    ]
    items: list[QAItem] = []
    while len(items) < max_items and any(queues):
        for queue in queues:
            if queue and len(items) < max_items:
                chunk = queue.pop(0)
                item = question_for_chunk(chunk, titles.get(chunk["doc_id"], chunk["doc_id"]))
                if item is not None:
                    items.append(item)
    return items


def question_for_chunk(chunk: dict, title: str) -> QAItem | None:
    sentences = [s for s in split_sentences(chunk["text"]) if _is_factual(s)]
    if not sentences:
        return None
    sentence = max(sentences, key=_information)
    template, question = _question(sentence, title, chunk.get("heading") or "")
    if question is None:
        return None
    return QAItem(
        qa_id=sha256(f"{chunk['chunk_id']}|{sentence}")[:16],
        question=question,
        ground_truth=sentence,
        gold_chunk_ids=[chunk["chunk_id"]],
        gold_contexts=[chunk["text"]],
        question_type="simple",
        source_cluster=int(chunk["cluster_id"]),
        generator=GENERATOR,
        prompt_version=TEMPLATE_VERSION,
        template=template,
    )


def _is_factual(sentence: str) -> bool:
    n_words = len(sentence.split())
    return 8 <= n_words <= 40 and sentence[-1] == "." and len(content_words(sentence)) >= 4


def _information(sentence: str) -> float:
    """Prefer sentences with checkable facts: quantities, numbers, names."""
    names = len(re.findall(r"(?<!^)(?<![.] )\b[A-Z][a-z]+", sentence))
    return 2 * len(_QUANTITY.findall(sentence)) + len(numbers(sentence)) + 0.5 * names + 0.01 * len(sentence)


def _question(sentence: str, title: str, heading: str) -> tuple[str, str | None]:
    definition = _DEFINITION.match(sentence)
    if definition:
        return "definition", f"What is {_term(definition.group('term'))}?"
    quantities = _QUANTITY.findall(sentence)
    if len(quantities) == 1:
        blanked = sentence.replace(quantities[0], "____", 1)
        return "quantity", f'According to "{title}", what value fills the blank: "{blanked}"'
    subject = _subject(sentence)
    if subject:
        where = f'the "{heading}" section of "{title}"' if heading and heading != title else f'"{title}"'
        return "subject", f"What does {where} say about {subject}?"
    return "none", None


def _subject(sentence: str) -> str | None:
    match = _VERB.search(sentence)
    if not match:
        return None
    subject = sentence[: match.start()].strip().rstrip(",")
    words = subject.split()
    if not 1 <= len(words) <= 7 or not content_words(subject):
        return None
    # "this policy", "it", "every team that" do not name what the question is about.
    if words[0].lower() in _VAGUE_START or words[-1].lower() in _VAGUE_END:
        return None
    return _term(subject)


_VAGUE_START = {"this", "these", "that", "those", "it", "they", "there", "each", "every", "all", "any", "such"}
_VAGUE_END = {"that", "which", "who", "whose", "where", "when"}


def _term(text: str) -> str:
    """Lowercase a leading common word but keep names ('Economy class' -> 'economy class', 'Wayfarer' stays)."""
    first, _, rest = text.partition(" ")
    if first in ("The", "A", "An") or (first.istitle() and rest and rest[0].islower()):
        first = first.lower()
    return f"{first} {rest}".strip()


def items_frame(items: list[QAItem]) -> pd.DataFrame:
    columns = list(QAItem.__dataclass_fields__)
    frame = pd.DataFrame([asdict(i) for i in items], columns=columns)
    return frame.drop(columns=["extra"])
