"""What an audit's judging cost: LLM calls and tokens per metric and per run, and money where a price is known.

The metric_scores step counts the judge's calls and tokens per call kind (core/judging/judgement.py
`total_usage`), and which metrics each kind serves (core/judging/llm_judge.py `call_serves`). A call
that serves several metrics (one `answer` call reads the statements faithfulness and answer relevance
both need) is split evenly among them, the remainder to the first, so the metrics' tokens add up to the
run's. A baseline re-scored in the run costs tokens too: they count toward the run, not toward a metric.

The offline judge makes no LLM call: it costs 0 tokens, and says so. A price table (RAG_EVAL_PRICE_TABLE,
settings.py `price_table`) maps an LLM judge's model to its price per 1,000 prompt and completion
tokens; a model it does not list has tokens but no cost. Dagster-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

PriceTable = Mapping[str, tuple[float, float]]  # model -> (per 1,000 prompt tokens, per 1,000 completion tokens)
LLM_JUDGE_PREFIX = "llm:"  # an LLM judge's name: llm:<model>:<mode>:prompt-<version>[+metric@identity...]
OFFLINE_NOTE = "the offline judge makes no LLM call: 0 tokens, no cost"
NOT_RECORDED_NOTE = "tokens not recorded (the scoring step's usage was not found in this run's events)"
SPLIT_NOTE = (
    "a call that serves several metrics is split evenly among them, so the metrics add up to the run; "
    "re-scoring a baseline counts toward the run only"
)
# The report table's token columns: per metric, and the run's (the same on every row).
METRIC_COLUMNS = ("judge_calls", "prompt_tokens", "completion_tokens")
RUN_COLUMNS = ("run_judge_calls", "run_prompt_tokens", "run_completion_tokens")


@dataclass(frozen=True)
class TokenCount:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenCount) -> TokenCount:
        return TokenCount(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    @classmethod
    def of(cls, counts: Mapping[str, object]) -> TokenCount:
        """From a usage dict (calls, prompt_tokens, completion_tokens; other keys ignored)."""
        return cls(*(int(counts.get(name, 0) or 0) for name in ("calls", "prompt_tokens", "completion_tokens")))  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunTokens:
    """The judge's calls and tokens of one audit run."""

    per_metric: dict[str, TokenCount] = field(default_factory=dict)
    other: TokenCount = TokenCount()  # calls serving no scored metric
    rescoring: TokenCount = TokenCount()  # the baseline's re-scoring in this run

    @property
    def total(self) -> TokenCount:
        return sum(self.per_metric.values(), TokenCount()) + self.other + self.rescoring


def split_usage(
    usage: Mapping[str, Mapping[str, object]], serves: Mapping[str, Iterable[str]], metrics: Iterable[str]
) -> RunTokens:
    """Per metric, its share of each call kind's counts. usage: {kind: {calls, prompt_tokens, ...}};
    serves: {kind: the metrics it serves}; metrics: the scored ones (each gets a row, 0 when no call served it)."""
    per_metric = {str(metric): TokenCount() for metric in metrics}
    other = TokenCount()
    for kind, counts in usage.items():
        count = TokenCount.of(counts)
        served = [metric for metric in dict.fromkeys(serves.get(kind, ())) if metric in per_metric]
        if not served:
            other += count
            continue
        for share, metric in zip(_shares(count, len(served)), served):
            per_metric[metric] += share
    return RunTokens(per_metric, other)


def _shares(count: TokenCount, parts: int) -> list[TokenCount]:
    """count split into `parts` whole shares that add up to it; the first shares take the remainder."""

    def split(total: int) -> list[int]:
        base, remainder = divmod(total, parts)
        return [base + (1 if index < remainder else 0) for index in range(parts)]

    return [
        TokenCount(*values)
        for values in zip(split(count.calls), split(count.prompt_tokens), split(count.completion_tokens))
    ]


def serves_of(usage: Mapping[str, Mapping[str, object]]) -> dict[str, tuple[str, ...]]:
    """{kind: metrics} from the metric_scores metadata's `judge_usage`, whose entries say whom they serve."""
    return {
        kind: tuple(name.strip() for name in str(counts.get("serves", "")).split(",") if name.strip())
        for kind, counts in usage.items()
    }


def judge_model(judge: str) -> str | None:
    """The model of an LLM judge's name (the first judge, when a run names several); None for another judge."""
    first = judge.split(",")[0].strip()
    if not first.startswith(LLM_JUDGE_PREFIX):
        return None
    body = first.removeprefix(LLM_JUDGE_PREFIX).split("+", 1)[0]  # a team's metric versions follow a '+'
    parts = body.rsplit(":", 2)  # <model>:<mode>:prompt-<version>; a model's name may hold ':' itself
    return parts[0] if len(parts) == 3 else body


def is_llm_judge(judge: str) -> bool:
    return judge_model(judge) is not None


def cost(count: TokenCount, judge: str, prices: PriceTable) -> float | None:
    """What count cost at the judge's model's price; 0 for the offline judge; None when the model is not priced."""
    model = judge_model(judge)
    if model is None:
        return 0.0
    if model not in prices:
        return None
    prompt, completion = prices[model]
    return round(count.prompt_tokens / 1000 * prompt + count.completion_tokens / 1000 * completion, 6)


def cost_note(judge: str, prices: PriceTable) -> str:
    """One sentence on what the cost column means for this judge and price table."""
    model = judge_model(judge)
    if model is None:
        return OFFLINE_NOTE
    if model in prices:
        prompt, completion = prices[model]
        return f"cost at {prompt:g} per 1,000 prompt and {completion:g} per 1,000 completion tokens of {model} (RAG_EVAL_PRICE_TABLE)"
    if prices:
        return f"{model} is not in RAG_EVAL_PRICE_TABLE: tokens only, no cost"
    return "no price table (RAG_EVAL_PRICE_TABLE): tokens only, no cost"
