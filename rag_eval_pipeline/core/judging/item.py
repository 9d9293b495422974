"""The item every judge and metric reads: a question, the candidate's answer and ranked contexts, and the
golden set's ground truth and gold chunk ids."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EvalItem:
    qa_id: str
    question: str
    answer: str
    contexts: list[dict] = field(default_factory=list)  # [{"id": str, "text": str}, ...] in rank order
    ground_truth: str = ""
    gold_chunk_ids: list[str] = field(default_factory=list)

    @property
    def context_texts(self) -> list[str]:
        return [c["text"] for c in self.contexts]
