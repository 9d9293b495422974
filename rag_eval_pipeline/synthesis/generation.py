"""Generation: walk each type's candidate tasks until its planned count of items is written.

A task the generator cannot turn into an item is recorded with its reason and the next candidate is
tried, up to a bounded number of tries, so a failing generator gives fewer items and its reasons,
never a silent empty set or an endless walk over the corpus.
"""

from __future__ import annotations

from rag_eval_pipeline.synthesis.items import GenerationFailure, GenerationTask, Generator, QAItem
from rag_eval_pipeline.synthesis.planning import TypePlan

# Tasks tried per planned item before giving up on a type; a generator may set its own `tries_per_item`.
MAX_TRIES_PER_ITEM = 3


def generate_items(
    generator: Generator, plans: list[TypePlan], candidates: dict[str, list[GenerationTask]]
) -> tuple[list[QAItem], list[GenerationFailure]]:
    """Rounds over all types at once (so an LLM generator can work on them concurrently)."""
    queues = {p.question_type: list(candidates.get(p.question_type, [])) for p in plans if p.planned}
    tries = getattr(generator, "tries_per_item", MAX_TRIES_PER_ITEM)
    budget = {p.question_type: tries * p.planned for p in plans if p.planned}
    written: dict[str, list[QAItem]] = {t: [] for t in queues}
    failures: list[GenerationFailure] = []
    wanted = {p.question_type: p.planned for p in plans}
    while True:
        batch = []
        for question_type, queue in queues.items():
            take = min(wanted[question_type] - len(written[question_type]), budget[question_type], len(queue))
            batch += queue[:take]
            del queue[:take]
            budget[question_type] -= take
        if not batch:
            break
        outcomes = list(generator.generate(batch))
        for task, outcome in zip(batch, outcomes):
            if isinstance(outcome, QAItem) and outcome.question_type == task.question_type:
                written[task.question_type].append(outcome)
            elif isinstance(outcome, GenerationFailure):
                failures.append(outcome)
            else:  # a malformed outcome is the task's failure, not a crash or a silent loss
                got = f"a {outcome.question_type} item" if isinstance(outcome, QAItem) else type(outcome).__name__
                failures.append(
                    GenerationFailure(
                        task, generator.name, f"the generator returned {got} for a {task.question_type} task"
                    )
                )
        failures += [
            GenerationFailure(t, generator.name, "the generator returned no outcome for this task")
            for t in batch[len(outcomes) :]
        ]
    return [item for items in written.values() for item in items], failures
