"""Judge server nodes on loopback: the exact `vllm serve` command line, and one lifecycle for any server.

- `VLLMNodeSpec` is one vLLM node: model folder, port, quantization, memory and batch limits, priority
  scheduling; `argv()` is the exact command. vLLM runs from its own virtual environment (its release pins
  a torch other than ours), so the spec names its executable.
- `LlamaCppNodeSpec` is the llama.cpp server (`python -m llama_cpp.server`), the stand-in that runs on
  a CPU: tests and the latency benchmark's stand-in mode drive the same lifecycle with it.
- `ServerNode` starts a spec's process in its own process group with a log file, waits until `GET
  /health` and `GET /v1/models` answer (with a deadline), and stops it by PID: SIGTERM to the group,
  SIGKILL after a grace period. A port already in use, a process that dies at start, or a deadline
  passed is a `NodeError` of one line (exit code and the log's last lines included).
- `NodeGroup` starts N nodes on N ports at once and hands back their base URLs
  (`http://127.0.0.1:PORT/v1`); the judge's client takes them comma-separated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

LOOPBACK = "127.0.0.1"  # nodes listen on loopback only: they are the run's, not the network's

# The values `vllm serve` accepts for the options we expose (a subset of its own choices; see
# rag_eval_pipeline_tests/test_llm/vllm_serve_flags.json for the flags checked against a real install).
Quantization = Literal["fp8", "awq", "none"]
KVCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]
StructuredOutputsBackend = Literal["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"]
QUANTIZATIONS: tuple[str, ...] = Quantization.__args__  # type: ignore[attr-defined]
KV_CACHE_DTYPES: tuple[str, ...] = KVCacheDtype.__args__  # type: ignore[attr-defined]
STRUCTURED_OUTPUTS_BACKENDS: tuple[str, ...] = StructuredOutputsBackend.__args__  # type: ignore[attr-defined]

# `--quantization` by what the checkpoint's config.json declares (checked against vLLM 0.33): a 16-bit
# checkpoint is quantized to FP8 at load by `fp8_per_tensor` (its `fp8` is deprecated for that); a
# quantized checkpoint gets no flag, so vLLM reads its method and picks its fastest kernel (an AWQ
# checkpoint runs on awq_marlin where it can; an explicit `awq` would force the slow kernel).
ONLINE_FP8 = "fp8_per_tensor"
CHECKPOINTS_FOR = {"fp8": {"fp8", "compressed-tensors", "modelopt", "fbgemm_fp8"}, "awq": {"awq"}}

# A node must never reach a model hub or phone home: the weights are a local folder.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


class NodeError(RuntimeError):
    """A judge node could not be started or checked; the message is one line."""


class NodeSpec(Protocol):
    """What ServerNode needs of a server: its command, where it listens, and how to tell it is ready."""

    @property
    def kind(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def model_name(self) -> str: ...
    @property
    def ready_paths(self) -> tuple[str, ...]: ...
    def argv(self) -> list[str]: ...
    def env(self) -> dict[str, str]: ...
    def check(self) -> None: ...


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_port(port: object) -> None:
    _require(isinstance(port, int) and 1 <= port <= 65535, f"port must be an integer in 1..65535, got {port!r}")


def _check_executable(executable: str, what: str) -> None:
    if shutil.which(executable) is None:
        raise NodeError(f"{what} {executable!r} is not an executable file (nor a command on PATH)")


@dataclass(frozen=True)
class VLLMNodeSpec:
    """One `vllm serve` node; `argv()` is its exact command line."""

    model: str  # a local model folder (the node runs offline: no hub download)
    port: int
    executable: str = "vllm"  # the `vllm` of vLLM's own virtual environment
    served_model_name: str = ""  # the name requests use; '' means the model folder's name
    quantization: Quantization = "fp8"  # fp8: FP8 weights (quantized at load if 16-bit); awq: an AWQ checkpoint
    kv_cache_dtype: KVCacheDtype = "auto"
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 8192
    tensor_parallel_size: int = 1
    max_num_seqs: int = 256
    structured_outputs_backend: StructuredOutputsBackend = "auto"
    priority_scheduling: bool = True  # requests carry `priority`; vLLM refuses it under its default fcfs policy
    gpus: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES of this node; () inherits the environment's
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(bool(str(self.model).strip()), "the vLLM node needs a model folder")
        _check_port(self.port)
        for field, choices in (
            ("quantization", QUANTIZATIONS),
            ("kv_cache_dtype", KV_CACHE_DTYPES),
            ("structured_outputs_backend", STRUCTURED_OUTPUTS_BACKENDS),
        ):
            value = getattr(self, field)
            _require(value in choices, f"{field} must be one of {', '.join(choices)}, got {value!r}")
        _require(
            0 < self.gpu_memory_utilization <= 1,
            f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}",
        )
        for field in ("max_model_len", "tensor_parallel_size", "max_num_seqs"):
            value = getattr(self, field)
            _require(isinstance(value, int) and value >= 1, f"{field} must be an integer >= 1, got {value!r}")

    @property
    def kind(self) -> str:
        return "vllm"

    @property
    def name(self) -> str:
        return f"vLLM node on port {self.port}"

    @property
    def model_name(self) -> str:
        return self.served_model_name or Path(self.model).name

    @property
    def ready_paths(self) -> tuple[str, ...]:
        return ("/health", "/v1/models")

    def argv(self) -> list[str]:
        argv = [self.executable, "serve", str(self.model), "--host", LOOPBACK, "--port", str(self.port)]
        argv += ["--served-model-name", self.model_name]
        argv += quantization_args(self.quantization, checkpoint_quantization(self.model), self.model)
        argv += [
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            "--gpu-memory-utilization",
            str(self.gpu_memory_utilization),
            "--max-model-len",
            str(self.max_model_len),
            "--tensor-parallel-size",
            str(self.tensor_parallel_size),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--structured-outputs-config.backend",
            self.structured_outputs_backend,
        ]
        if self.priority_scheduling:
            argv += ["--scheduling-policy", "priority"]
        return argv + list(self.extra_args)

    def env(self) -> dict[str, str]:
        env = dict(OFFLINE_ENV)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        return env

    def check(self) -> None:
        """What can be known before starting: the executable runs and the model folder exists."""
        _check_executable(self.executable, "the vLLM executable")
        if not Path(self.model).is_dir():
            raise NodeError(f"the model folder {self.model} does not exist (a node loads local weights only)")
        self.argv()  # a quantization the checkpoint cannot take fails here, before anything starts


def checkpoint_quantization(model: str | os.PathLike) -> str | None:
    """The `quant_method` a model folder's config.json declares; None for a 16-bit checkpoint or no config."""
    try:
        config = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    declared = config.get("quantization_config") if isinstance(config, dict) else None
    method = declared.get("quant_method") if isinstance(declared, dict) else None
    return str(method).lower() if method else None


def quantization_args(setting: str, declared: str | None, model: str | os.PathLike) -> list[str]:
    """The `--quantization` arguments for a setting and what the checkpoint declares (see ONLINE_FP8)."""
    if setting == "none":
        return []
    if declared is None:
        if setting == "fp8":
            return ["--quantization", ONLINE_FP8]
        raise NodeError(f"quantization {setting} needs a {setting.upper()} checkpoint; {model} declares none")
    if declared not in CHECKPOINTS_FOR[setting]:
        raise NodeError(f"quantization {setting} does not fit {model}: its config.json declares {declared}")
    return []


@dataclass(frozen=True)
class LlamaCppNodeSpec:
    """llama-cpp-python's OpenAI-compatible server over a GGUF file: the stand-in node that runs on a CPU."""

    model: str  # a GGUF file
    port: int
    python: str = sys.executable  # a Python with llama-cpp-python[server] installed
    model_alias: str = ""  # '' means the file's stem
    n_ctx: int = 4096
    n_threads: int = 2
    seed: int = 7

    def __post_init__(self) -> None:
        _check_port(self.port)

    @property
    def kind(self) -> str:
        return "llama.cpp"

    @property
    def name(self) -> str:
        return f"llama.cpp node on port {self.port}"

    @property
    def model_name(self) -> str:
        return self.model_alias or Path(self.model).stem

    @property
    def ready_paths(self) -> tuple[str, ...]:
        return ("/v1/models",)  # this server has no /health

    def argv(self) -> list[str]:
        threads = str(self.n_threads)
        return [
            *(self.python, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", self.model_name),
            *("--host", LOOPBACK, "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--seed", str(self.seed)),
            *("--n_threads", threads, "--n_threads_batch", threads),
            *("--use_mlock", "False", "--logits_all", "False", "--interrupt_requests", "False"),
        ]

    def env(self) -> dict[str, str]:
        return {}

    def check(self) -> None:
        _check_executable(self.python, "the Python of the llama.cpp server")


def replicas(spec: VLLMNodeSpec, count: int) -> list[VLLMNodeSpec]:
    """`count` copies of a spec on consecutive ports; with GPUs named, each takes its own slice of them
    (tensor_parallel_size each), so two replicas never share a device."""
    _require(isinstance(count, int) and count >= 1, f"replicas must be an integer >= 1, got {count!r}")
    _check_port(spec.port + count - 1)
    width = spec.tensor_parallel_size
    if spec.gpus:
        _require(
            len(spec.gpus) >= count * width,
            f"{count} replica(s) x tensor_parallel_size {width} need {count * width} GPUs, "
            f"{len(spec.gpus)} named ({','.join(spec.gpus)})",
        )
    return [
        dataclasses.replace(spec, port=spec.port + i, gpus=spec.gpus[i * width : (i + 1) * width] if spec.gpus else ())
        for i in range(count)
    ]


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could not listen on host:port now (the same bind a server makes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def one_line(text: str, limit: int = 600) -> str:
    """Log lines as one line: blank lines dropped, the rest joined by ' | ', the end kept if too long."""
    joined = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else "..." + joined[-limit:]


class ServerNode:
    """One server process: `start()` (or `with`), `stop()`; safe to stop twice."""

    def __init__(
        self,
        spec: NodeSpec,
        log_dir: str | os.PathLike,
        *,
        startup_timeout_s: float = 900.0,
        stop_grace_s: float = 30.0,
        poll_s: float = 0.5,
    ):
        self.spec = spec
        self.log_path = Path(log_dir) / f"{spec.kind}-{spec.port}.log"
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.poll_s = poll_s
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.spec.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The process's exit status once it ended (negative: the signal that ended it); None before."""
        return self._proc.poll() if self._proc is not None else None

    def preflight(self) -> None:
        """Refuse, before anything starts, a spec that cannot run or a port another process holds."""
        self.spec.check()
        if port_in_use(self.spec.port):
            raise NodeError(
                f"{self.spec.name}: port {self.spec.port} on {LOOPBACK} is already in use; "
                "stop what holds it or choose another port (nothing was started)"
            )

    def launch(self) -> None:
        """Start the process (own process group, output to the log file) without waiting for it."""
        if self._proc is not None:
            raise NodeError(f"{self.spec.name} was already started (pid {self._proc.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                self.spec.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.spec.env()},
                start_new_session=True,  # its own process group: stop() signals the server and its workers
            )
        # The group is killed even if the owner never calls stop() (at garbage collection or exit).
        self._finalizer = weakref.finalize(self, _signal_group, self._proc.pid, signal.SIGKILL)

    def start(self) -> ServerNode:
        self.preflight()
        self.launch()
        self.wait_ready()
        return self

    def wait_ready(self, deadline: float | None = None) -> None:
        """Return once the ready paths answer; a NodeError (and the node stopped) if it dies or the deadline passes."""
        deadline = time.monotonic() + self.startup_timeout_s if deadline is None else deadline
        try:
            while not self._answers():
                self._raise_if_exited()
                if time.monotonic() > deadline:
                    raise NodeError(
                        f"{self.spec.name} did not answer {', '.join(self.spec.ready_paths)} within "
                        f"{self.startup_timeout_s:.0f} s (log {self.log_path}): {one_line(self.log_tail())}"
                    )
                time.sleep(self.poll_s)
        except BaseException:
            self.stop()
            raise

    def _raise_if_exited(self) -> None:
        code = self._proc.poll() if self._proc is not None else None
        if code is not None:
            raise NodeError(
                f"{self.spec.name} exited with code {code} during startup (log {self.log_path}): "
                f"{one_line(self.log_tail())}"
            )

    def _answers(self) -> bool:
        """Whether every ready path answers 200; /v1/models must also list the spec's model."""
        for path in self.spec.ready_paths:
            body = _get(f"http://{LOOPBACK}:{self.spec.port}{path}")
            if body is None:
                return False
            if path.endswith("/models"):
                self._check_models(body)
        return True

    def _check_models(self, body: bytes) -> None:
        try:
            served = [model["id"] for model in json.loads(body).get("data") or []]
        except (ValueError, TypeError, KeyError, AttributeError):
            served = []
        if self.spec.model_name not in served:
            raise NodeError(f"{self.spec.name} serves {served or 'no model'}, not {self.spec.model_name!r}")

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period; nothing happens the second time."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
            # Right after the leader is reaped, so its pid cannot have been reused: the stragglers go too.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def log_tail(self, lines: int = 8) -> str:
        if not self.log_path.is_file():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> ServerNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _get(url: str) -> bytes | None:
    """The body of a 200 answer, or None while the server is not up (refused, reset, 5xx, timeout)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read() if response.status == 200 else None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


class NodeGroup:
    """Several nodes started together (each port checked before any starts) and stopped together."""

    def __init__(self, nodes: Iterable[ServerNode]):
        self.nodes = list(nodes)
        _require(bool(self.nodes), "a node group needs at least one node")
        ports = [node.spec.port for node in self.nodes]
        _require(len(set(ports)) == len(ports), f"the nodes' ports must differ, got {ports}")

    @classmethod
    def of(cls, specs: Sequence[NodeSpec], log_dir: str | os.PathLike, **node_options: float) -> NodeGroup:
        return cls(ServerNode(spec, log_dir, **node_options) for spec in specs)

    @property
    def base_urls(self) -> list[str]:
        return [node.base_url for node in self.nodes]

    @property
    def base_url(self) -> str:
        """The base URLs comma-separated, as the judge's client takes replicas."""
        return ",".join(self.base_urls)

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self) -> NodeGroup:
        """Start every node at once (a vLLM node takes minutes), wait for all; on any failure stop all."""
        for node in self.nodes:
            node.preflight()
        try:
            for node in self.nodes:
                node.launch()
            deadline = time.monotonic() + max(node.startup_timeout_s for node in self.nodes)
            for node in self.nodes:
                node.wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> NodeGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
