"""Criterion metrics: a natural-language criterion the LLM judge grades, G-Eval style.

The judge reads the fields the criterion names, works through its evaluation steps (a note per step,
exactly as many as there are steps: the reply schema fixes the count) and gives a score from 1 (not met)
to 5 (fully met), which the metric maps to [0, 1]. A criterion is versioned like the judge's own prompts:
its identity is a hash of its text, steps, fields, the template and the reply schema, so a changed
criterion is a new metric version, never compared with the old (core/metrics/registry.py, scoring_name).
The offline judge cannot grade a criterion and says so (the metric is unmeasured, with that reason).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

FIELDS = ("question", "answer", "contexts", "ground_truth")  # what a criterion may read
LOWEST, HIGHEST = 1, 5
TEMPLATE = (
    "Grade the ANSWER of a retrieval-augmented QA system on one criterion.\n"
    "CRITERION: {criterion}\n"
    "EVALUATION STEPS:\n{steps}\n"
    "step_findings: exactly {n_steps} short notes, what you found at each step, in order. "
    "score: {lowest} if the criterion is not met at all, {highest} if it is fully met.\n\n{fields}"
)
DEFAULT_STEP = "Read the answer and decide how well it meets the criterion."
OFFLINE_CANNOT_GRADE = (
    "the offline judge cannot grade a criterion (a natural-language rubric needs a language model): use the LLM judge"
)
_LABELS = {"question": "QUESTION", "answer": "ANSWER", "contexts": "CONTEXT", "ground_truth": "REFERENCE"}


class CriterionReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step_findings: list[str]
    score: Literal[1, 2, 3, 4, 5]


def reply_schema(n_steps: int) -> type[BaseModel]:
    """The reply model of one criterion: exactly one finding per evaluation step."""
    bounded = Field(min_length=n_steps, max_length=n_steps)
    return create_model(CriterionReply.__name__, __base__=CriterionReply, step_findings=(list[str], bounded))


@dataclass(frozen=True)
class Criterion:
    """A criterion to grade each item on. text: what a good answer does; steps: how to check it (default
    one step); reads: the fields the judge is shown (of FIELDS); name: the metric's name when the criterion
    is passed as an object (a criterion named by its module path, or an entry point, takes that name)."""

    text: str
    steps: tuple[str, ...] = ()
    reads: tuple[str, ...] = ("question", "answer")
    name: str = ""
    tolerance: float | None = None

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("a criterion needs its text: what a good answer does")
        unknown = sorted(set(self.reads) - set(FIELDS))
        if unknown or not self.reads:
            raise ValueError(f"a criterion reads some of {', '.join(FIELDS)}; got {list(self.reads)}")
        object.__setattr__(self, "steps", tuple(self.steps) or (DEFAULT_STEP,))
        object.__setattr__(self, "reads", tuple(field for field in FIELDS if field in self.reads))

    @cached_property
    def key(self) -> str:
        """The version: what the judge is asked, hashed; it names the criterion in a judgement."""
        material = {
            "template": TEMPLATE,
            "criterion": self.text,
            "steps": list(self.steps),
            "reads": list(self.reads),
            "schema": reply_schema(len(self.steps)).model_json_schema(),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()[:8]

    def prompt(self, texts: dict[str, str]) -> str:
        """The request for one item; texts holds each field as the judge reads it (contexts numbered)."""
        steps = "\n".join(f"{n}. {step}" for n, step in enumerate(self.steps, start=1))
        shown = "\n\n".join(f"{_LABELS[field]}:\n{texts[field] or '(none)'}" for field in self.reads)
        return TEMPLATE.format(
            criterion=self.text, steps=steps, n_steps=len(self.steps), lowest=LOWEST, highest=HIGHEST, fields=shown
        )


def normalised(score: int) -> float:
    """A 1-to-5 grade as a score in [0, 1]."""
    return (score - LOWEST) / (HIGHEST - LOWEST)
