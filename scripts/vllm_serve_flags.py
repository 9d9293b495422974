"""The `vllm serve` flags of an installed vLLM, as the fixture the judge-node argv test checks against.

    python3.11 -m venv /tmp/vllm-venv && /tmp/vllm-venv/bin/pip install vllm
    .venv/bin/python scripts/vllm_serve_flags.py --vllm /tmp/vllm-venv/bin/vllm
    .venv/bin/python scripts/vllm_serve_flags.py --vllm /tmp/vllm-venv/bin/vllm --try-argv   # and run our argv

Reads `vllm serve --help=all` (every flag, its aliases, the choices it lists, whether it takes JSON keys as
`--flag.key value`) and, from the same install's Python, the `--quantization` methods and the structured
outputs backends it accepts (neither is listed in the help). Writes
rag_eval_pipeline_tests/test_llm/vllm_serve_flags.json. The help is built with VLLM_TARGET_DEVICE=cpu, so
it runs on a machine without an accelerator; the flags do not depend on the device.

`--try-argv` also runs the exact command our `VLLMNodeSpec` builds (every option set away from vLLM's
default) against a config-only model folder it writes (a tiny Llama config.json, no weights, no
tokenizer), on the CPU platform, and reports how far vLLM got: past argument parsing and engine
configuration (it logs its non-default args and resolves the architecture), failing only where it needs a
tokenizer. An unknown flag or a refused value would stop it at parsing with exit code 2 instead.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "rag_eval_pipeline_tests" / "test_llm" / "vllm_serve_flags.json"
JSON_KEYS_NOTE = "Should either be a valid JSON string or JSON keys"
OPTION_LINE = re.compile(r"^  (-{1,2}[A-Za-z0-9][\w.-]*)(.*)$")
CHOICES = re.compile(r"^\s*(\{[^}]*\}|\[[^\]]*\])")
# Names read from the install's own Python (neither is in the help text).
PROBE = (
    "import json, typing\n"
    "from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS\n"
    "from vllm.config.structured_outputs import StructuredOutputsBackend\n"
    "print(json.dumps({'quantization_methods': sorted(QUANTIZATION_METHODS),"
    " 'structured_outputs_backends': sorted(typing.get_args(StructuredOutputsBackend))}))\n"
)
# A config-only Llama: enough for vLLM to resolve the architecture and validate the engine options.
TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
}


def _run(argv: list[str], timeout_s: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s)


def parse_help(text: str) -> dict[str, dict]:
    """Each flag of a `--help=all` text: its choices (when listed) and whether it takes JSON keys."""
    flags: dict[str, dict] = {}
    current: list[str] = []
    for line in text.splitlines():
        match = OPTION_LINE.match(line)
        if match:
            current = _names(line.strip())
            choices = _choices(match.group(2))
            for name in current:
                flags[name] = {"choices": choices, "json_keys": False}
        elif JSON_KEYS_NOTE in line:
            for name in current:
                flags[name]["json_keys"] = True
        elif line and not line.startswith(" "):
            current = []  # a section heading: the next flag starts afresh
    return dict(sorted(flags.items()))


def _names(option_line: str) -> list[str]:
    """`--quantization QUANTIZATION, -q QUANTIZATION` -> ['--quantization', '-q']."""
    return [part.split()[0] for part in option_line.split(", ") if part.startswith("-")]


def _choices(rest: str) -> list[str] | None:
    match = CHOICES.match(rest)
    if not match:
        return None
    return [c.strip(" '\"") for c in match.group(1)[1:-1].split(",") if c.strip(" '\"")]


def version_of(vllm: str) -> str:
    return _run([vllm, "--version"], 300).stdout.strip().splitlines()[-1]


def flag_list(vllm: str) -> dict:
    done = _run([vllm, "serve", "--help=all"])
    if done.returncode != 0:
        _fail(
            f"`{vllm} serve --help=all` exited with {done.returncode}: {' | '.join(done.stderr.strip().splitlines()[-3:])}"
        )
    python = Path(vllm).with_name("python")
    names = json.loads(_run([str(python), "-c", PROBE], 300).stdout)
    return {
        "vllm_version": version_of(vllm),
        "generated_by": "scripts/vllm_serve_flags.py (vllm serve --help=all, VLLM_TARGET_DEVICE=cpu)",
        **names,
        "flags": parse_help(done.stdout),
    }


def try_argv(vllm: str) -> dict:
    """Our argv, every option away from vLLM's default, through the real `vllm serve` on the CPU platform."""
    sys.path.insert(0, str(REPO))
    from rag_eval_pipeline.core.llm.nodes import VLLMNodeSpec, port_in_use

    with tempfile.TemporaryDirectory(prefix="vllm-argv-") as folder:
        model = Path(folder) / "tiny-llama"
        model.mkdir()
        (model / "config.json").write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
        port = next(p for p in range(18123, 18200) if not port_in_use(p))
        spec = VLLMNodeSpec(
            model=str(model),
            port=port,
            executable=vllm,
            served_model_name="judge",
            kv_cache_dtype="fp8",
            gpu_memory_utilization=0.8,
            max_model_len=4096,
            max_num_seqs=64,
            structured_outputs_backend="xgrammar",
            extra_args=("--enforce-eager",),
        )
        done = _run(spec.argv())
    log = done.stdout + done.stderr
    return {
        "argv": spec.argv(),
        "exit_code": done.returncode,
        "refused_by_the_parser": done.returncode == 2 or "unrecognized arguments" in log or "invalid choice" in log,
        "engine_options_accepted": "Resolved architecture" in log,
        "non_default_args": next(
            (line.split("non-default args: ", 1)[1] for line in log.splitlines() if "non-default args: " in line), ""
        ),
        "last_error": next((line for line in reversed(log.splitlines()) if "Error" in line), ""),
    }


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--vllm", default="vllm", help="the vllm executable of vLLM's own virtual environment")
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--try-argv", action="store_true", help="also run our argv through the real `vllm serve`")
    args = parser.parse_args()
    vllm = shutil.which(args.vllm)
    if vllm is None:
        _fail(f"{args.vllm!r} is not an executable; install vLLM in a venv of its own and name its bin/vllm")
    found = flag_list(vllm)
    args.out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(f"vLLM {found['vllm_version']}: {len(found['flags'])} flags written to {args.out}")
    if args.try_argv:
        print(json.dumps(try_argv(vllm), indent=1))


if __name__ == "__main__":
    main()
