"""`rag-eval questions`: a published golden set's questions, for a CI job to answer at its commit.

Only `qa_id` and `question`: the ground truths and gold chunks stay with the reviewers (`review export`).
With RAG_EVAL_SERVER and RAG_EVAL_TOKEN set, the gate service answers (a `read` token is enough).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import results_store, settings

QUESTION_FIELDS = ("qa_id", "question")  # as synthesis.versions.published_questions gives them


def questions_jsonl(items: list[dict]) -> str:
    return "".join(json.dumps({k: item[k] for k in QUESTION_FIELDS}, ensure_ascii=False) + "\n" for item in items)


@click.command(help="write a published golden set's questions (qa_id, question) as JSONL, for a CI job to answer")
@click.option("--tenant", required=True)
@click.option("--version", help="golden-set version (default: the tenant's latest published one)")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="the .jsonl to write")
def questions(tenant: str, version: str | None, out: Path) -> int:
    from rag_eval_pipeline.core.files import atomic_write_text

    if settings().service.remote:
        from rag_eval_pipeline.cli.remote import service

        answer = service().get(f"/v1/tenants/{tenant}/questions", params={"version": version} if version else None)
        version, items = answer["version"], answer["items"]
    else:
        from rag_eval_pipeline.synthesis.versions import published_questions

        try:
            version, frame = published_questions(results_store(), tenant, version)
        except ValueError as error:
            raise BadInput(str(error)) from None
        items = frame.to_dict("records")
    atomic_write_text(out, questions_jsonl(items))
    click.echo(f"{len(items)} questions of {tenant}/{version} written to {out}")
    return 0
