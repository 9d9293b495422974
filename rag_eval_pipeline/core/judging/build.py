"""The judge a command or the Python API scores with, built from one set of options.

`JudgeOptions` holds what `--judge`, `--base-url`... (or RAG_EVAL_JUDGE_*) say; `build_judge` makes the
offline judge or the LLM judge of them, with the embedder whose vectors are cached in the warehouse.
Light to import: `rag-eval --help` reads the options' defaults from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_eval_pipeline.core.defaults import EMBEDDING_CACHE_FILE

if TYPE_CHECKING:
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import Judge
    from rag_eval_pipeline.core.llm.client import LLMSettings
    from rag_eval_pipeline.settings import JudgeSettings


@dataclass(frozen=True)
class JudgeOptions:
    """The judge and its OpenAI-compatible server, as the command line (or RAG_EVAL_JUDGE_*) set them."""

    kind: str
    base_url: str
    model: str
    api_key: str
    mode: str
    response_format: str
    concurrency: int
    timeout_s: float
    max_retries: int
    rate_limit_budget_s: float
    priority: int | None
    cache: str

    @classmethod
    def from_settings(cls, judge: JudgeSettings) -> JudgeOptions:
        """The options of the settings (RAG_EVAL_JUDGE_*): what a command without judge options runs with."""
        return cls(**{field.name: getattr(judge, field.name) for field in dataclasses.fields(cls)})

    def llm_settings(self) -> LLMSettings:
        from rag_eval_pipeline.core.llm.client import LLMSettings

        return LLMSettings(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            response_format=self.response_format,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            rate_limit_budget_s=self.rate_limit_budget_s,
            priority=self.priority,
        )


def build_judge(options: JudgeOptions, warehouse_root: Path, precision: str | None = None) -> tuple[Judge, Embedder]:
    """(judge, embedder); the embeddings are cached in the warehouse, at `precision` (None: float32)."""
    from rag_eval_pipeline.core.embeddings import Embedder
    from rag_eval_pipeline.core.judging.judge import OfflineJudge
    from rag_eval_pipeline.core.judging.llm_judge import build_llm_judge

    embedder = Embedder(Path(warehouse_root) / EMBEDDING_CACHE_FILE, precision=precision)
    if options.kind == "offline":
        return OfflineJudge(embedder), embedder
    judge = build_llm_judge(options.llm_settings(), options.mode, options.cache)
    judge.name += embedder.judge_suffix  # its relevance and correctness use the embeddings
    return judge, embedder
