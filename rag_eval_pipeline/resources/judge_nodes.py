"""Judge nodes as a resource: the vLLM servers a run starts on loopback, and the judge that uses them.

`JudgeNodesResource` starts the configured nodes (core/llm/nodes.py) when Dagster sets the run's
resources up and stops them at teardown; with `lifetime="process"` they start with the first run of
the process and stop when it exits, so a long-lived worker loads the weights once. `JudgeOnNodesResource`
is the judge with the nodes as a nested resource: Dagster sets the nodes up before the judge and tears
them down after it, and the judge's base URL is the nodes' URLs, comma-separated (one per replica).
`judge_on_nodes` puts the two together when RAG_EVAL_VLLM_MODEL is set; otherwise the judge is unchanged.

The nodes belong to the process that runs the steps (the project's in-process executor): a multiprocess
executor would start them once per step process, and the second would find the ports taken.
"""

from __future__ import annotations

import atexit
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from rag_eval_pipeline.core.llm.nodes import LOOPBACK, NodeGroup, VLLMNodeSpec
from rag_eval_pipeline.core.llm.nodes import replicas as replica_specs
from rag_eval_pipeline.resources.judge import JudgeResource
from rag_eval_pipeline.settings import JUDGE_VARIABLES, VLLM_VARIABLES, Settings, SettingsError, VLLMSettings

_DEFAULT = VLLMSettings()  # the defaults live in the settings, and only there
DEFAULT_LOG_DIR = Path(tempfile.gettempdir()) / "rag-eval-judge-nodes"


def _like_setting(name: str, **constraints: Any) -> Any:
    """A resource field with its setting's default and description (a tuple default as a list)."""
    default = getattr(_DEFAULT, name)
    default = list(default) if isinstance(default, tuple) else default
    return Field(default=default, description=VLLMSettings.model_fields[name].description, **constraints)


class JudgeNodesResource(ConfigurableResource):
    """vLLM judge nodes on 127.0.0.1, one per port from `port` up; started at setup, stopped at teardown."""

    model: str = Field(description=VLLMSettings.model_fields["model"].description)
    executable: str = _like_setting("executable")
    served_model_name: str = _like_setting("served_model_name")
    replicas: int = _like_setting("replicas", ge=1)
    port: int = _like_setting("port", ge=1, le=65535)
    quantization: Literal["fp8", "awq", "none"] = _like_setting("quantization")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = _like_setting("kv_cache_dtype")
    gpu_memory_utilization: float = _like_setting("gpu_memory_utilization", gt=0, le=1)
    max_model_len: int = _like_setting("max_model_len", ge=1)
    tensor_parallel_size: int = _like_setting("tensor_parallel_size", ge=1)
    max_num_seqs: int = _like_setting("max_num_seqs", ge=1)
    structured_outputs_backend: Literal["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"] = (
        _like_setting("structured_outputs_backend")
    )
    priority_scheduling: bool = _like_setting("priority_scheduling")
    gpus: list[str] = _like_setting("gpus")  # lists: Dagster's config has no tuples
    extra_args: list[str] = _like_setting("extra_args")
    lifetime: Literal["run", "process"] = _like_setting("lifetime")
    startup_timeout_s: float = _like_setting("startup_timeout_s", gt=0, allow_inf_nan=False)
    stop_grace_s: float = _like_setting("stop_grace_s", gt=0, allow_inf_nan=False)
    log_dir: str = _like_setting("log_dir")

    _group: NodeGroup | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, vllm: VLLMSettings) -> JudgeNodesResource:
        fields = vllm.model_dump()
        return cls(**{**fields, "gpus": list(vllm.gpus), "extra_args": list(vllm.extra_args)})

    def specs(self) -> list[VLLMNodeSpec]:
        first = VLLMNodeSpec(
            model=self.model,
            port=self.port,
            executable=self.executable,
            served_model_name=self.served_model_name,
            quantization=self.quantization,
            kv_cache_dtype=self.kv_cache_dtype,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
            tensor_parallel_size=self.tensor_parallel_size,
            max_num_seqs=self.max_num_seqs,
            structured_outputs_backend=self.structured_outputs_backend,
            priority_scheduling=self.priority_scheduling,
            gpus=tuple(self.gpus),
            extra_args=tuple(self.extra_args),
        )
        return replica_specs(first, self.replicas)

    @property
    def model_name(self) -> str:
        return self.served_model_name or Path(self.model).name

    @property
    def base_url(self) -> str:
        """The nodes' base URLs, comma-separated: known from the ports before any node starts."""
        return ",".join(f"http://{LOOPBACK}:{self.port + i}/v1" for i in range(self.replicas))

    def group(self) -> NodeGroup:
        return NodeGroup.of(
            self.specs(),
            self.log_dir or DEFAULT_LOG_DIR,
            startup_timeout_s=self.startup_timeout_s,
            stop_grace_s=self.stop_grace_s,
        )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if context.log is not None:
            context.log.info(f"judge nodes on {self.base_url}: {' '.join(self.specs()[0].argv())}")
        self._group = _shared_group(self) if self.lifetime == "process" else self.group().start()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self.lifetime == "run" and self._group is not None:
            self._group.stop()
        self._group = None


class JudgeOnNodesResource(JudgeResource):
    """The LLM judge on the judge nodes it depends on: its base URL is theirs, its model their served name."""

    nodes: JudgeNodesResource

    @classmethod
    def over(cls, judge: JudgeResource, nodes: JudgeNodesResource) -> JudgeOnNodesResource:
        """The judge's own options (mode, timeouts, cache, ...) kept; where it sends its calls, from the nodes."""
        fields = {name: getattr(judge, name) for name in JudgeResource.model_fields}
        server = {"kind": "llm", "base_url": nodes.base_url, "model": nodes.model_name}
        return cls(**{**fields, **server, "response_format": "json_schema", "nodes": nodes})


def judge_on_nodes(judge: JudgeResource, current: Settings) -> JudgeResource:
    """The judge on judge nodes when RAG_EVAL_VLLM_MODEL is set; else the judge unchanged.

    A judge server named as well is a contradiction, refused in one line rather than silently overridden.
    """
    if not current.vllm.enabled:
        return judge
    nodes = JudgeNodesResource.from_settings(current.vllm)
    if current.judge.base_url:
        raise SettingsError(
            f"{VLLM_VARIABLES['model']} and {JUDGE_VARIABLES['base_url']} are both set: the judge's URL comes "
            "from the judge nodes when they are configured; unset one of them"
        )
    if current.judge.model and current.judge.model != nodes.model_name:
        raise SettingsError(
            f"{JUDGE_VARIABLES['model']} is {current.judge.model!r} but the judge nodes serve "
            f"{nodes.model_name!r} ({VLLM_VARIABLES['served_model_name']}); unset it or make them agree"
        )
    return JudgeOnNodesResource.over(judge, nodes)


# Nodes with lifetime "process": one group per distinct command line, stopped when the process exits.
_SHARED: dict[tuple[tuple[str, ...], ...], NodeGroup] = {}
_SHARED_LOCK = threading.Lock()


def _shared_group(resource: JudgeNodesResource) -> NodeGroup:
    key = tuple(tuple(spec.argv()) for spec in resource.specs())
    with _SHARED_LOCK:
        group = _SHARED.get(key)
        if group is not None and group.running:
            return group
        if group is not None:  # a node died since the last run: start the set afresh
            group.stop()
        _SHARED[key] = group = resource.group().start()
        return group


@atexit.register
def _stop_shared_groups() -> None:
    with _SHARED_LOCK:
        for group in _SHARED.values():
            group.stop()
        _SHARED.clear()
