"""Defaults that `rag-eval --help` shows, in a module that imports nothing heavy.

The help must come up without pandas, torch or Dagster, so these constants live here; the modules
that use them (the LLM client, the planner, the comparison, the table reader, the settings) import them
from here. The metrics' names come from their registry (core/metrics/registry.py), which the help does
not import.
"""

from __future__ import annotations

from typing import Literal, get_args

JudgeKind = Literal["offline", "llm"]
GeneratorKind = Literal["offline", "llm"]  # of synthetic questions: templates, or the judge's LLM server
JudgeMode = Literal["decomposed", "fused"]  # 2 calls per item for the core metrics, or 1
JUDGE_MODES: tuple[str, ...] = get_args(JudgeMode)
DEFAULT_JUDGE_MODE: JudgeMode = "decomposed"
ResponseFormat = Literal["json_schema", "json_object_schema"]  # vLLM and OpenAI, or the llama.cpp server
RESPONSE_FORMATS: tuple[str, ...] = get_args(ResponseFormat)
DEFAULT_RESPONSE_FORMAT: ResponseFormat = "json_schema"
NO_API_KEY = "not-needed"  # servers without authentication accept any key; the client needs one

# A server that never answers fails a call after (1 + max_retries) x timeout_s plus about 1.5 s of
# backoff: 4.5 minutes with these defaults. An attempt's time includes waiting in the server's queue,
# so a slow CPU server with several calls in flight may need a longer timeout.
DEFAULT_TIMEOUT_S = 90.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_CONCURRENCY = 4
# HTTP 429 and 503 are back-pressure (a rate limit, a server still loading or full): a call keeps retrying
# them, waiting what Retry-After asks (at most MAX_RETRY_AFTER_S at a time), while its time stays within
# this budget; max_retries does not count them.
DEFAULT_RATE_LIMIT_BUDGET_S = 300.0
MAX_RETRY_AFTER_S = 60.0
Tier = Literal["small", "large"]  # of tenants (automation/queues.py); the judge may set a priority per tier

# The question types of a synthesized golden set, and their shares.
DEFAULT_MIX = {"simple": 0.4, "reasoning": 0.2, "multi_context": 0.25, "unanswerable": 0.15}

DEFAULT_TOLERANCE = 0.05  # largest allowed drop of a metric's mean before the gate blocks
# The least share of a metric's applicable items that must be measured, on the candidate's side and the
# baseline's, for the gate to decide on it and for a candidate to become a baseline (reporting/compare.py).
DEFAULT_MIN_COVERAGE = 0.8

# Far above any real question, answer, ground truth or retrieved chunk; the offline judge's cost grows
# with the product of the field sizes, so a pathological field would otherwise run for many minutes.
MAX_FIELD_CHARS = 20_000

# The commit recorded for a candidate audited without one (the demo, `rag-eval run`).
DEFAULT_COMMIT = "working-tree"
EMBEDDING_CACHE_FILE = "embedding_cache.sqlite"  # in the warehouse folder
