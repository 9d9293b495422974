"""The generated parts of the documentation site, made from the code and the committed results.

    .venv/bin/python scripts/build_docs.py     # writes docs/generated/ (git-ignored)
    make docs                                  # the same, then `mkdocs build --strict` into site/

mkdocs.yml names this file as a hook, so every `mkdocs build` and `mkdocs serve` regenerates the pages
first (`on_pre_build`). The hand-written pages under docs/ embed them with `--8<--` snippet lines:

- configuration.md: every field of the typed settings (`rag_eval_pipeline/settings.py`) with its
  environment variable, its effective default (what `settings.load()` returns on an empty environment)
  and its description; and the config fields of the Dagster resources and of the assets' run config;
- figures.md: the key numbers of each `benchmarks/results/*.json`, with the command that reproduces it
  (from the benchmark script's docstring);
- architecture.md: each package's docstring, and the first paragraph of each module's docstring.

Nothing here is typed by hand, so none of it can go stale: a field, a package or a results file added
to the code shows up at the next build, and rag_eval_pipeline_tests/test_docs.py checks the coverage.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rag_eval_pipeline"
RESULTS = REPO / "benchmarks" / "results"
BENCHMARKS = REPO / "benchmarks"
GENERATED = REPO / "docs" / "generated"

# The docs describe this checkout's code, whatever else is installed.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# -- small Markdown helpers ----------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """One table cell: no line breaks, and no pipe that ends the cell (Python-Markdown's tables take a pipe
    inside a code span as text, and one outside it escaped)."""
    text = " ".join((value if isinstance(value, str) else _number(value)).split())
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else part.replace("|", "\\|") for part in parts)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 1000:
            return f"{int(value):,}"
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    headers = list(headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    return f"`{text}`"


def _first_paragraph(docstring: str | None) -> str:
    return " ".join((docstring or "").strip().split("\n\n")[0].split())


# -- configuration: the typed settings -----------------------------------------------------------------


@dataclass(frozen=True)
class SettingRow:
    path: str  # dotted field path in Settings, e.g. judge.timeout_s
    variable: str
    default: str
    description: str


def setting_variables() -> dict[str, str]:
    """Each settings field's environment variable, from the tables `settings.load()` reads them by."""
    from rag_eval_pipeline import settings

    return {
        **{name: variable for name, (variable, _) in settings.LOCATIONS.items()},
        **{f"judge.{name}": variable for name, variable in settings.JUDGE_VARIABLES.items()},
        **{f"followed_branch.{name}": variable for name, variable in settings.BRANCH_VARIABLES.items()},
        **{f"production.{name}": variable for name, variable in settings.PRODUCTION_VARIABLES.items()},
        **{f"service.{name}": variable for name, variable in settings.SERVICE_VARIABLES.items()},
        **{f"vllm.{name}": variable for name, variable in settings.VLLM_VARIABLES.items()},
        "candidate_modules": settings.CANDIDATE_MODULES_VARIABLE,
        "metrics": settings.METRICS_VARIABLE,
        "phoenix_url": settings.PHOENIX_URL_VARIABLE,
        "run_stale_after_s": settings.RUN_STALE_AFTER_VARIABLE,
        "embedding_precision": settings.EMBEDDING_PRECISION_VARIABLE,
    }


def _nested_model(annotation: Any) -> type | None:
    """The settings model a field holds (also through `X | None`), or None for a plain value."""
    from pydantic import BaseModel

    candidates = typing.get_args(annotation) or (annotation,)
    return next((c for c in candidates if inspect.isclass(c) and issubclass(c, BaseModel)), None)


def setting_fields(model: type | None = None, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf field of the settings, nested models expanded: (dotted path, its FieldInfo)."""
    from rag_eval_pipeline.settings import Settings

    model = model or Settings
    fields = []
    for name, info in model.model_fields.items():
        nested = _nested_model(info.annotation)
        if nested is not None:
            fields += setting_fields(nested, f"{prefix}{name}.")
        else:
            fields.append((f"{prefix}{name}", info))
    return fields


def _effective_default(path: str, info: Any) -> str:
    """What the field holds on an empty environment, a location shown under the working directory."""
    from pydantic_core import PydanticUndefined

    from rag_eval_pipeline import settings

    working_directory = PurePosixPath("/working-directory")
    value: Any = settings.load(environ={}, cwd=Path(working_directory))
    for part in path.split("."):
        value = getattr(value, part) if value is not None else None
    if value is None:  # inside an optional model that is unset by default
        value = None if info.default is PydanticUndefined else info.default
    if value in (None, "", ()):
        return "unset"
    text = str(value)
    if text.startswith(str(working_directory)):
        text = "." + text[len(str(working_directory)) :]
    return _code(text)


def configuration_rows() -> list[SettingRow]:
    variables = setting_variables()
    return [
        SettingRow(path, variables.get(path, ""), _effective_default(path, info), info.description or "")
        for path, info in setting_fields()
    ]


def configuration_table(prefix: str = "") -> str:
    """The settings whose dotted path starts with prefix ('' for all) as a Markdown table."""
    rows = [row for row in configuration_rows() if row.path.startswith(prefix)]
    return table(
        ["variable", "default", "what", "setting"],
        ([_code(r.variable), r.default, r.description, _code(r.path)] for r in rows),
    )


VARIABLE_NAME = re.compile(r"^(RAG_EVAL|DAGSTER|AWS)_[A-Z0-9_]+$")
YAML_ENV = re.compile(r"^\s*env:\s*([A-Z][A-Z0-9_]*)\s*$", re.MULTILINE)


def variables_read_elsewhere() -> dict[str, list[str]]:
    """Environment variables named in the package's code or the Dagster instance files but not settings
    fields, with the files that name them."""
    in_settings = set(setting_variables().values())
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "settings.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE_NAME.match(node.value):
                found.setdefault(node.value, set()).add(path.relative_to(REPO).as_posix())
    for path in sorted([REPO / "dagster.yaml", *(REPO / "deploy").rglob("*.yaml")]):
        for name in YAML_ENV.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(path.relative_to(REPO).as_posix())
    return {name: sorted(files) for name, files in sorted(found.items()) if name not in in_settings}


def elsewhere_table() -> str:
    rows = ([_code(name), ", ".join(_code(f) for f in files)] for name, files in variables_read_elsewhere().items())
    return table(["variable", "read by"], rows)


# -- configuration: Dagster resources and the assets' run config ---------------------------------------


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _config_table(cls: type) -> str:
    from pydantic_core import PydanticUndefined

    rows = []
    for name, info in cls.model_fields.items():
        default = "required" if info.default is PydanticUndefined else _code(repr(info.default))
        rows.append([_code(name), _code(_type_name(info.annotation)), default, info.description or ""])
    return table(["field", "type", "default", "what"], rows) if rows else "No config fields.\n"


def _config_section(cls: type) -> str:
    about = _first_paragraph(cls.__doc__)
    return f"#### `{cls.__name__}`\n\nIn `{cls.__module__}`. {about}\n\n{_config_table(cls)}"


def _classes_in(module_names: Iterable[str], base: type | tuple[type, ...]) -> list[type]:
    import importlib

    found = []
    for module_name in module_names:
        module = importlib.import_module(module_name)
        found += [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and issubclass(obj, base)
        ]
    return found


def _modules_named(pattern: str) -> list[str]:
    return sorted(
        ".".join(path.relative_to(REPO).with_suffix("").parts) for path in REPO.glob(pattern) if path.stem != "__init__"
    )


def dagster_config_page() -> str:
    """The Dagster resources' config fields and each asset's run config (imports dagster)."""
    from dagster import Config, ConfigurableIOManager, ConfigurableIOManagerFactory, ConfigurableResource

    parts = ["### Dagster resources\n"]
    resource_bases = (ConfigurableResource, ConfigurableIOManager, ConfigurableIOManagerFactory)
    for cls in _classes_in(_modules_named("rag_eval_pipeline/resources/*.py"), resource_bases):
        parts.append(_config_section(cls))
    parts.append("### Run config of the assets\n")
    for cls in _classes_in(_modules_named("rag_eval_pipeline/*/assets.py"), Config):
        parts.append(_config_section(cls))
    return "\n".join(parts)


# -- layout: packages and modules ----------------------------------------------------------------------


def packages() -> list[Path]:
    """Every package folder under rag_eval_pipeline/, the top one first."""
    return sorted((p.parent for p in PACKAGE.rglob("__init__.py")), key=lambda p: p.relative_to(REPO).parts)


def package_docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


def _imports_dagster(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(name == "dagster" or name.startswith(("dagster.", "dagster_")) for name in names):
            return True
    return False


def layout_page() -> str:
    parts = []
    for package in packages():
        dotted = ".".join(package.relative_to(REPO).parts)
        parts.append(f"### `{dotted}`\n\n{package_docstring(package)}\n")
        rows = []
        for module in sorted(package.glob("*.py")):
            if module.name == "__init__.py":
                continue
            tree = ast.parse(module.read_text(encoding="utf-8"))
            rows.append(
                [_code(module.name), _first_paragraph(ast.get_docstring(tree)), "yes" if _imports_dagster(tree) else ""]
            )
        subpackages = sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())
        rows += [[_code(f"{name}/"), "a package, below", ""] for name in subpackages]
        if rows:
            parts.append(table(["module", "what", "imports dagster"], rows))
    return "\n".join(parts)


def _docstring_of(path: Path) -> str:
    return _first_paragraph(ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))))


def _leading_comment(path: Path) -> str:
    """The first sentence of the comment block a YAML file opens with."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(" ".join(lines).split())
    return re.split(r"[.:] ", text)[0].rstrip(".:") + "." if text else ""


def _folder_docstring(folder: Path) -> str:
    """What a test folder's __init__.py or conftest.py says, or else which test modules it holds."""
    for name in ("__init__.py", "conftest.py"):
        if (folder / name).is_file() and (text := _docstring_of(folder / name)):
            return text
    return "tests: " + ", ".join(_code(p.stem) for p in sorted(folder.glob("test_*.py")))


def beside_package_page() -> str:
    """The tests, the benchmarks, the scripts and the deployment files, each said by its own docstring."""
    tests = REPO / "rag_eval_pipeline_tests"
    parts = [f"### `rag_eval_pipeline_tests/`\n\n{ast.get_docstring(ast.parse((tests / '__init__.py').read_text()))}\n"]
    rows = [
        [_code(f"{folder.name}/"), _folder_docstring(folder)]
        for folder in sorted(tests.iterdir())
        if folder.is_dir() and any(folder.glob("*.py"))
    ]
    rows += [
        [_code(module.name), _docstring_of(module)]
        for module in sorted(tests.glob("*.py"))
        if module.name != "__init__.py"
    ]
    parts.append(table(["folder or module", "what"], rows))
    for folder, pattern in (("benchmarks", "*.py"), ("scripts", "*.py")):
        rows = [[_code(path.name), _docstring_of(path)] for path in sorted((REPO / folder).glob(pattern))]
        parts.append(f"### `{folder}/`\n\n" + table(["script", "what"], rows))
    deploy = sorted(p for p in (REPO / "deploy").rglob("*") if p.suffix in (".yaml", ".yml"))
    rows = [[_code(path.relative_to(REPO).as_posix()), _leading_comment(path)] for path in deploy]
    parts.append("### `deploy/`\n\n" + table(["file", "what"], rows))
    return "\n".join(parts)


# -- figures: benchmarks/results/*.json -----------------------------------------------------------------


def benchmark_script(result: Path) -> Path | None:
    """The script that wrote a results file: the one whose name shares the most leading words with it."""
    scripts = sorted(BENCHMARKS.glob("*.py"))

    def shared_words(script: Path) -> int:
        prefix = _shared_prefix(result.stem, script.stem)
        return len(prefix.split("_")) if prefix else 0

    best = max(scripts, key=shared_words, default=None)
    return best if best is not None and shared_words(best) > 0 else None


def reproduce_commands(result: Path, data: dict) -> list[str]:
    """The command a results file records, or else its script's usage line for it.

    A script that writes several files (lineage_demo.json, lineage_shared-pdfs.json) names each one's
    command with the file's own suffix (`--name shared-pdfs`); a file without a suffix gets the first.
    """
    if isinstance(data.get("command"), str):  # what was run, arguments and all
        return [data["command"]]
    commands = []
    script = benchmark_script(result)
    if script is not None:
        docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        usage = [
            line.strip()
            for line in docstring.splitlines()
            if line.strip().startswith(f".venv/bin/python benchmarks/{script.name}")
        ]
        suffix = _alphanumeric(result.stem.removeprefix(_shared_prefix(result.stem, script.stem)))
        matching = [line for line in usage if suffix and suffix in _alphanumeric(line)]
        commands += matching or usage[:1]
    return commands


def _alphanumeric(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def _shared_prefix(result_stem: str, script_stem: str) -> str:
    shared = []
    for a, b in zip(result_stem.split("_"), script_stem.split("_")):
        if a != b:
            break
        shared.append(a)
    return "_".join(shared)


def _last_commit(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h, %ad", "--date=short", "--", str(path.relative_to(REPO))],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out


def _get(data: dict, *keys: str) -> Any:
    for key in keys:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    return None if data == {} else data


def _range(side: dict, low: str = "min_s", high: str = "max_s") -> str:
    return f"{_number(side.get(low))} to {_number(side.get(high))}"


def _celery_lineage(data: dict) -> str:
    sides = [("in process, one tenant after the other", "in_process"), ("two Celery workers, both at once", "workers")]
    rows = [[label, data[k]["median_s"], _range(data[k]), len(data[k].get("runs_s", []))] for label, k in sides]
    per_worker = ", ".join(f"{w}: {n}" for w, n in (data.get("runs_taken_per_worker") or {}).items())
    return (
        table(["side", "median s", "range s", "runs"], rows)
        + f"\nRatio workers / in process: **{_number(data.get('ratio_workers_to_in_process'))}**. "
        + f"Runs taken per worker: {per_worker}.\n"
    )


def _chunk_clusters(data: dict) -> str:
    peer = data["peer"]
    rows = [
        [f"this code (batch {data['new']['each'][0].get('batch_size')})"]
        + [data["new"][k] for k in ("runs", "median_wall_s")]
        + [
            _range(data["new"], "min_wall_s", "max_wall_s"),
            data["new"]["median_cpu_s"],
            data["new"]["median_chunks_per_s"],
        ],
        [f"previous code ({peer.get('commit', '')[:7]})"]
        + [peer[k] for k in ("runs", "median_wall_s")]
        + [_range(peer, "min_wall_s", "max_wall_s"), peer["median_cpu_s"], peer["median_chunks_per_s"]],
    ]
    corpus, machine = data.get("corpus", {}), data.get("machine", {})
    agreement = data.get("output_agreement_last_runs", {})
    return (
        f"{corpus.get('chunks')} chunks of {corpus.get('documents')} documents, "
        f"{machine.get('busy_processes_beside', 0)} CPU-bound processes beside it, {machine.get('cpus')} cores.\n\n"
        + table(["code", "runs", "median wall s", "range s", "median CPU s", "chunks/s"], rows)
        + f"\nRatio previous / this (median wall): **{_number(data.get('ratio_peer_to_new_median_wall'))}**. "
        + f"Same columns: {_number(agreement.get('columns_equal'))}; clusters' adjusted Rand index "
        + f"{_number(agreement.get('cluster_adjusted_rand_index'))}.\n"
    )


def _compare_commits(data: dict) -> str:
    rows, outcomes = [], []
    for name, entry in data.items():
        if not isinstance(entry, dict) or "this" not in entry:
            continue
        this, earlier, peer = entry.get("this", {}), entry.get("earlier", {}), entry.get("peer", {})
        rows.append(
            [
                _code(name),
                this.get("median_s"),
                earlier.get("median_s"),
                entry.get("ratio_this_to_earlier"),
                peer.get("median_s"),
                len(this.get("runs_s", [])),
            ]
        )
        for side, values in (("this", this), ("earlier", earlier)):
            if values.get("outcome"):
                outcomes.append(f"- `{name}`, {side}: {values['outcome']}")
        for side, values in (("this", this), ("earlier", earlier)):
            if values.get("median_figures"):
                figures = ", ".join(f"{key} {_number(value)}" for key, value in values["median_figures"].items())
                outcomes.append(f"- `{name}`, {side}, medians of what it wrote: {figures}")
    header = ["measurement", f"this ({data.get('this')}) median s", f"earlier ({data.get('earlier')}) median s"]
    return table([*header, "ratio", "peer median s", "runs"], rows) + (
        "\n" + "\n".join(outcomes) + "\n" if outcomes else ""
    )


def _clustering_curve(data: dict) -> str:
    rows = []
    for point in data["curve"]:
        this, earlier = point.get("this", {}), point.get("earlier", {})
        rows.append(
            [
                point["chunks"],
                this.get("wall_s"),
                this.get("peak_rss_mib"),
                earlier.get("wall_s", earlier.get("skipped", earlier.get("timed_out_after_s"))),
                earlier.get("peak_rss_mib"),
                point.get("wall_ratio_this_to_earlier"),
                f"{_number(this.get('clusters'))} / {_number(earlier.get('clusters'))}",
            ]
        )
    real = data.get("real_corpus", {})
    agreement, itself = real.get("this_vs_earlier", {}), real.get("earlier_vs_itself_shuffled", {})
    runs = real.get("runs", {})
    header = ["chunks", "this wall s", "this peak MiB", "earlier wall s", "earlier peak MiB", "ratio", "clusters"]
    return (
        f"Earlier code: {data.get('earlier', '')[:7]}. Synthetic chunks: {data.get('synthetic')}.\n\n"
        + table(header, rows)
        + f"\nReal corpus, {_number(real.get('chunks'))} chunks: this {_number(runs.get('this', {}).get('wall_s'))} s, "
        + f"earlier {_number(runs.get('earlier', {}).get('wall_s'))} s; adjusted Rand index this vs earlier "
        + f"**{agreement.get('adjusted_rand_index')}** (clusters {agreement.get('clusters')}, outlier status "
        + f"equal for a share of {agreement.get('outlier_status_equal_share')}); earlier vs itself on the chunks "
        + f"shuffled {itself.get('adjusted_rand_index')}.\n"
    )


def _demo_first_run(data: dict) -> str:
    rows = [
        [
            f"{name} ({data['commits'][name][:7]})",
            data[name]["median_wall_s"],
            ", ".join(_number(r["wall_s"]) for r in data[name]["runs"]),
            data[name]["runs"][0].get("venv_mib"),
            data[name]["runs"][0].get("torch_installed"),
            all(r.get("exit") == 0 and r.get("demo_finished") for r in data[name]["runs"]),
        ]
        for name in ("this", "earlier")
    ]
    header = ["commit", "median wall s", "runs s", "venv MiB", "torch installed", "demo finished"]
    return table(header, rows) + f"\nRatio this / earlier: **{_number(data.get('ratio_this_to_earlier'))}**.\n"


def _cost_vs_ragas(data: dict) -> str:
    rows = []
    for mode, side in data["ours"].items():
        m = side["four_metrics"]
        rows.append(
            [
                f"ours, {mode}",
                side.get("triplets"),
                m["calls_per_triplet"],
                m["prompt_tokens_per_triplet"],
                m["completion_tokens_per_triplet"],
                m["wall_s_per_triplet"],
            ]
        )
    for variant, side in (data.get("ragas") or {}).get("variants", {}).items():
        m = side["four_metrics"]
        rows.append(
            [
                f"ragas, {variant.replace('_', ' ')}",
                side.get("triplets"),
                m["calls_per_triplet"],
                m["prompt_tokens_per_triplet"],
                m["completion_tokens_per_triplet"],
                m["wall_s_per_triplet"],
            ]
        )
    ratios = [
        [
            pair,
            r["ratio"],
            r.get("ratio_if_no_cache_hit"),
            r.get("token_ratio"),
            r.get("wall_ratio"),
            r.get("meets_one_third"),
            r.get("ours_calls_per_valid_value"),
            r.get("ragas_calls_per_valid_value"),
            r.get("valid_value_ratio"),
        ]
        for pair, r in data.get("ratios", {}).items()
    ]
    server, triplets = data.get("server", {}), data.get("triplets", {})
    chunks = ", ".join(str(n) for n in triplets.get("contexts_per_triplet", []))
    return (
        f"Server: {server.get('model')}, {server.get('serves')}; retrieved chunks per triplet: {chunks}; "
        f"our call cache: {data.get('call_cache', 'a fresh in-memory cache per mode')}. "
        "Per triplet, the four metrics together:\n\n"
        + table(["side", "triplets", "calls", "prompt tokens", "completion tokens", "wall s"], rows)
        + f"\nTarget: {data.get('target')}.\n\n"
        + (
            table(
                [
                    "ours / ragas",
                    "calls ratio",
                    "if no cache hit",
                    "tokens ratio",
                    "wall ratio",
                    "meets 1/3",
                    "ours calls per valid value",
                    "ragas calls per valid value",
                    "ratio per valid value",
                ],
                ratios,
            )
            if ratios
            else "No ragas side in this run.\n"
        )
        + _measured_before_after(data)
    )


def _measured_before_after(data: dict) -> str:
    """Triplets each metric measured with an earlier commit's judge and with this one's (`--before`)."""
    measured = data.get("measured_per_metric")
    if not measured:
        return ""
    rows = [
        [mode, metric, m["triplets"], m["before"], m["after"]]
        for mode, metrics in measured.items()
        for metric, m in metrics.items()
    ]
    commit = _get(data, "before", "commit")
    per_valid = [
        [mode, v.get("before"), v.get("after")]
        for mode, v in data.get("calls_per_valid_value_before_after", {}).items()
    ]
    return (
        f"\nTriplets measured (scored, not unmeasured), judge at {commit} and this one:\n\n"
        + table(["mode", "metric", "triplets", f"measured at {commit}", "measured now"], rows)
        + (
            "\nOur calls per valid (scored) metric value, before and after:\n\n"
            + table(["mode", f"at {commit}", "now"], per_valid)
            if per_valid
            else ""
        )
    )


def _gate_wall_time(data: dict) -> str:
    labels = [
        ("gate, passing candidate", "gate_pass"),
        ("gate, blocked candidate", "gate_blocked"),
        ("peer: `rag-eval --help`", "peer_cli_start"),
    ]
    rows = [[label, data[k]["median_s"], _range(data[k]), len(data[k].get("runs_s", []))] for label, k in labels]
    ratio = ", ".join(f"{k} {_number(v)}" for k, v in (data.get("ratio_to_peer") or {}).items())
    return (
        f"Tenant: {data.get('tenant')}.\n\n"
        + table(["what", "median s", "range s", "runs"], rows)
        + f"\nRatio to the peer: {ratio}.\n"
    )


def _ppi_coverage(data: dict) -> str:
    names = {
        "judge_only": "judge only (peer: its own interval)",
        "labels_only": "labels only (peer: no judge)",
        "ppi": "PPI (classical)",
        "ppi_plus_plus": "PPI++ (the report's mean intervals)",
    }
    parts = []
    for name, figures in data["sets"].items():
        counts = list(figures["by_labels"])
        rows = [
            [label, *(f"{figures['by_labels'][n][method]['coverage']:.1%}" for n in counts)]
            + [*(_number(figures["by_labels"][n][method]["median_width"]) for n in counts)]
            for method, label in names.items()
        ]
        parts.append(
            f"**{name}**: {figures['measured']} records measured by {data['judge']} (of {figures['records']}); "
            f"true mean {figures['true_mean']}, judge mean {figures['judge_mean']}.\n\n"
            + table(
                ["interval", *(f"coverage, n={n}" for n in counts), *(f"median width, n={n}" for n in counts)], rows
            )
        )
    return f"Nominal {data['nominal']:.0%}, {data['trials']} draws per n.\n\n" + "\n".join(parts)


def _service_gate(data: dict) -> str:
    sides = []
    for label, key in (
        ("reference candidate (exit 0)", "gate_reference"),
        ("`--outputs`, blocked (exit 1)", "gate_outputs_blocked"),
    ):
        for side in ("cli", "service"):
            figures = data[key][side]
            name = "CLI gate (peer)" if side == "cli" else "through the service"
            sides.append([f"{label}: {name}", figures["median_s"], _range(figures), len(figures["runs_s"])])
    token = data["token"]
    batch = data["concurrent_tenants"]
    return (
        table(["gate", "median s", "range s", "runs"], sides)
        + f"\nOverhead of the service (median difference): reference {_number(data['gate_reference']['overhead_s'])} s, "
        f"outputs {_number(data['gate_outputs_blocked']['overhead_s'])} s; target within "
        f"{_number(data['target_overhead_s'])} s: {'met' if data['target_met'] else 'not met'}.\n\n"
        f"Token verification (HS256, in process): median {_number(token['hs256_verify_median_us'])} µs. "
        f"An authenticated request (GET baselines) {_number(token['authenticated_request_median_ms'])} ms against an "
        f"unauthenticated one (GET /openapi.json) {_number(token['peer_unauthenticated_request_median_ms'])} ms "
        f"(medians of {token['requests']}).\n\n"
        + table(
            [f"{batch['tenants']} tenants' gates at once", "median s", "range s", "runs"],
            [
                [
                    "operator CLI processes (peer)",
                    batch["cli_at_once"]["median_s"],
                    _range(batch["cli_at_once"]),
                    len(batch["cli_at_once"]["runs_s"]),
                ],
                [
                    "CI clients through the service",
                    batch["service_at_once"]["median_s"],
                    _range(batch["service_at_once"]),
                    len(batch["service_at_once"]["runs_s"]),
                ],
            ],
        )
        + f"\nRatio service / CLI: {_number(batch['ratio_service_to_cli'])}.\n"
    )


def _history_view(data: dict) -> str:
    def cell(side: dict, key: str) -> str:
        figures = side.get(key) or {}
        return f"{_number(figures.get('median_s'))} ({_number(figures.get('max_s'))})" if figures else "-"

    local, production = data.get("local") or {}, data.get("production") or {}
    rows = [
        [
            "build: read and render (in process; production: GET /history from the service)",
            cell(local, "build"),
            cell(production, "service"),
        ],
        ["reads alone (production: the tenant's transactions as the service's role)", "-", cell(production, "read")],
        [
            "`rag-eval history` in a fresh process (production: through the service)",
            cell(local, "cli"),
            cell(production, "cli"),
        ],
        ["load in a fresh headless Chromium (cold)", cell(local, "load"), cell(production, "load")],
        [
            "**build + cold load** (target under 2 s)",
            cell(local, "build_plus_load"),
            cell(production, "service_plus_load"),
        ],
        ["`rag-eval history` + cold load", cell(local, "cli_plus_load"), cell(production, "cli_plus_load")],
        [
            "peer: one plain report page, (fetched and) loaded cold",
            cell(local, "peer_report_load"),
            cell(production, "peer_report_fetch_plus_load"),
        ],
    ]
    size = production.get("data") or {}
    plan = "; ".join(
        re.sub(r"\s*\(cost=[^)]*\)", "", line).removeprefix("->").strip()
        for line in production.get("plan_as_service_role") or []
        if "Scan" in line or "Loop" in line
    )
    load = _get(data, "machine", "load_average_1m") or {}
    return (
        f"{_number(local.get('audits'))} audits x {_number(local.get('metrics'))} metrics "
        f"({_number(local.get('blocked'))} blocked, {_number(local.get('promotions'))} promotions, "
        f"{_number(local.get('page_bytes'))} bytes); production: {_number(size.get('metric_scores'))} metric_scores rows "
        f"over {_number(size.get('tenants'))} tenants, {_number(size.get('report_tables'))} report tables. "
        f"Medians (max) in seconds of {data.get('runs')} runs; Chromium {data.get('chromium')}; within the target: "
        f"local {_number(local.get('within_target'))}, production {_number(production.get('within_target'))}.\n\n"
        + table(["measured", "local", "production (1M rows, 50 tenants)"], rows)
        + f"\nPlan of the reports statement as the service's role: {plan or '-'}. 1-minute load average "
        + f"{_number(load.get('start'))} at the start, {_number(load.get('end'))} at the end.\n"
    )


def _golden_quality(data: dict) -> str:
    types = ["simple", "reasoning", "multi_context", "unanswerable"]
    rows = []
    for side in ("before", "after"):
        s = data[side]
        keeps = s["reviewer_keeps"]
        per_type = ", ".join(
            f"{t} {keeps[t]['kept_by_reviewer']} of {keeps[t]['n']}" for t in types if keeps.get(t, {}).get("n")
        )
        rejected = ", ".join(f"{k} {v}" for k, v in (s.get("rejected_by_stage") or {}).items()) or "-"
        share = keeps["all"]["share"]
        rows.append(
            [
                side,
                s["generated"],
                s["verified"],
                "-" if share is None else f"{share:.0%}",
                per_type or "-",
                rejected,
                s["verified_per_hour_median"],
            ]
        )
    q = data.get("quality_stage_on_before_questions", {})
    return (
        f"Corpus `{data.get('corpus')}`, {data.get('n_requested')} items requested, against {data.get('against')}, "
        f"{data.get('repeats')} repeats.\n\n"
        + table(
            [
                "golden set",
                "generated",
                "verified",
                "kept by the reviewer",
                "kept per type",
                "rejected by stage",
                "verified pairs per hour (median)",
            ],
            rows,
        )
        + f"\nRatio of verified pairs per hour, after / before: {_number(data.get('verified_per_hour_ratio_after_before'))}. "
        + f"The quality stage alone on the 'before' questions: rejects {q.get('rejected')} of {q.get('questions')} "
        + f"({q.get('labelled_discard')} labelled discard), precision {_number(q.get('precision'))}, "
        + f"recall {_number(q.get('recall'))}.\n"
    )


def _ingestion_furniture(data: dict) -> str:
    totals = data["totals"]
    rows = [
        [
            _code(name),
            f.get("pages"),
            f.get("labelled"),
            f.get("removed"),
            f.get("missed"),
            f.get("lost_words"),
            f"{f.get('furniture_headings_before')} to {f.get('furniture_headings_after')}",
        ]
        for name, f in data.get("files", {}).items()
    ]
    return (
        table(["total", "value"], ([_code(k), v] for k, v in totals.items()))
        + "\n"
        + table(["file", "pages", "labelled", "removed", "missed", "lost words", "chunks headed by furniture"], rows)
    )


def _judge_accuracy(data: dict) -> str:
    rows = []
    for judge, splits in data.get("halueval_qa_dev", {}).items():
        for split, s in splits.items():
            d = s.get("detection", {})
            rows.append(
                [judge, split, s["records"], s["pairwise_F"], s["pairwise_graded"], d.get("f1"), d.get("roc_auc")]
            )
    ablations = [
        [signal, a.get("without_full_pairwise_F"), a.get("without_held_out_pairwise_F"), a.get("only_full_pairwise_F")]
        for signal, a in data.get("halueval_ablations_v2", {}).items()
    ]
    ares = [
        [judge, subset, s["records"], s["accuracy"], s["roc_auc"]]
        for judge, subsets in data.get("ares_fewshot_faithfulness", {}).items()
        for subset, s in subsets.items()
    ]
    wiki = data.get("wikiqa_sample", {})
    return (
        f"HaluEval QA (split: {data.get('split')}):\n\n"
        + table(["judge", "split", "records", "pairwise F", "pairwise graded", "detection F1", "ROC-AUC"], rows)
        + "\nSignals of the offline judge (pairwise F):\n\n"
        + table(["signal", "F without it (all)", "F without it (held out)", "F with it alone (all)"], ablations)
        + "\nARES few-shot faithfulness:\n\n"
        + table(["judge", "subset", "records", "accuracy", "ROC-AUC"], ares)
        + f"\nWikiQA sample: {wiki.get('records')} records, pairwise answer relevance "
        + f"{_number(wiki.get('pairwise_answer_relevance'))} ({wiki.get('method')}).\n"
    )


def _judge_calibration(data: dict) -> str:
    def shown(row: dict, name: str) -> str:
        if row.get(name) is None:
            return "n/a"
        low, high = row.get(f"{name}_low"), row.get(f"{name}_high")
        interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
        return f"{row[name]:.3f}{interval}"

    parts = []
    for side in data["judges"]:
        rows, unmeasured = [], []
        for name, figures in side["sets"].items():
            for metric, row in figures["metrics"].items():
                threshold = "every item bad" if row.get("best_threshold") is None else f"{row['best_threshold']:.3f}"
                if row.get("n_unmeasured"):
                    unmeasured.append(f"- `{name}`, `{metric}`: {row['unmeasured_reasons']}\n")
                rows.append(
                    [
                        _code(name),
                        _code(metric),
                        f"{row['n_measured']} / {row['n_labels']}",
                        shown(row, "accuracy_best")
                        + (f" ({threshold})" if row.get("accuracy_best") is not None else ""),
                        shown(row, "accuracy_at_half"),
                        shown(row, "kappa"),
                        shown(row, "roc_auc"),
                        shown(row, "pairwise") + (f" ({row['n_pairs']} pairs)" if row.get("n_pairs") else ""),
                    ]
                )
        parts.append(
            f"Judge `{side['judge']}`, {side['what']}:\n\n"
            + table(
                [
                    "set",
                    "metric",
                    "measured / labels",
                    "accuracy@best (threshold)",
                    "accuracy@0.5",
                    "kappa",
                    "ROC-AUC",
                    "pairwise",
                ],
                rows,
            )
            + ("\nUnmeasured, and why:\n\n" + "".join(unmeasured) if unmeasured else "")
        )
    return "\n".join(parts)


def _judge_abstention(data: dict) -> str:
    rule, tuning = data.get("rule", {}), _get(data, "rule", "tuning") or {}
    product = ", ".join(f"{k} {_number(v)}" for k, v in rule.get("product", {}).items())
    effect_rows = [
        _abstention_row(name, which, e)
        for name, parts in data.get("effect", {}).items()
        for which, e in parts.items()
        if which == ("all" if "held_out" not in parts else "held_out")
    ]
    bucket_rows = [
        [name, dimension, b["bucket"], b["items"], _pairwise_cell(b), b["roc_auc"]]
        for name, dimensions in data.get("buckets", {}).items()
        for dimension, rows in dimensions.items()
        for b in rows
    ]
    return (
        f"Thresholds in the judge: {product}; tuned on the tuning half: "
        f"{_number(rule.get('product_is_tuned'))} ({tuning.get('criterion')}; {tuning.get('feasible')} of "
        f"{tuning.get('grid_points')} grid points kept to that cap).\n\n"
        "The rule's effect (held-out half of each labeled set; the whole of each handwritten check). Accuracy is "
        'pairwise agreement where the set has pairs, else ROC-AUC; "given up" is today\'s accuracy on the items '
        "the rule abstains on:\n\n"
        + table(
            [
                "set / metric",
                "part",
                "items",
                "abstained",
                "why",
                "today, all items",
                "scored items",
                "given up",
                "today's mean score on the given up (good / bad)",
            ],
            effect_rows,
        )
        + "\nToday's judge by bucket (all records; pairs counted when both records fall in the bucket):\n\n"
        + table(["set / metric", "by", "bucket", "items", "pairwise (pairs)", "ROC-AUC"], bucket_rows)
    )


def _abstention_row(name: str, which: str, e: dict) -> list[Any]:
    why = ", ".join(f"{kind} {n}" for kind, n in e.get("abstained_by_reason", {}).items())
    share = e.get("abstained_share")
    abstained = f"{e.get('abstained')} ({share:.0%})" if share is not None else "-"
    by_label = e.get("today_mean_on_abstained_by_label") or {}
    means = " / ".join(
        f"{label} {_number(by_label[key]['mean_score'])} ({by_label[key]['items']})"
        for key, label in (("1", "good"), ("0", "bad"))
        if key in by_label
    )
    return [name, which, e.get("items"), abstained, why, *(_accuracy_cell(e[k]) for k in _ABSTENTION_SIDES), means]


_ABSTENTION_SIDES = ("today_all", "abstaining_scored", "today_on_abstained")


def _accuracy_cell(figures: dict) -> str:
    """Pairwise agreement (with its pairs) where there are pairs, else ROC-AUC; "-" with no item."""
    if figures.get("pairs"):
        return _pairwise_cell(figures)
    return f"AUC {_number(figures['roc_auc'])}" if figures.get("roc_auc") is not None else "-"


def _pairwise_cell(figures: dict) -> str:
    return f"{_number(figures['pairwise'])} ({figures['pairs']})" if figures.get("pairs") else "-"


def _lineage_run(data: dict) -> str:
    lineage = data["lineage"]
    steps, rows = lineage.get("step_s", {}), lineage.get("rows", {})
    names = list(dict.fromkeys([*rows, *steps]))
    means = data["lineage"].get("means", {})
    return (
        f"Documents: `{data.get('docs')}`. Whole lineage in process: **{_number(lineage.get('wall_s'))} s**; loading "
        f"the code location: median {_number(_get(data, 'definitions_load_s', 'median'))} s.\n\n"
        + table(["table or step", "rows", "step s"], ([_code(n), rows.get(n, ""), steps.get(n, "")] for n in names))
        + "\nMean scores of the reference candidate:\n\n"
        + table(["metric", "mean"], ([_code(k), v] for k, v in means.items()))
    )


def _rls_scores(data: dict) -> str:
    rows = []
    for query, r in data["results"].items():
        rows.append(
            [
                _code(query),
                f"{_number(r['rls']['median_ms'])} / {_number(r['rls']['p95_ms'])}",
                f"{_number(r['no_rls']['median_ms'])} / {_number(r['no_rls']['p95_ms'])}",
                f"{_number(r['ratio_rls_to_no_rls']['median'])} / {_number(r['ratio_rls_to_no_rls']['p95'])}",
                r.get("rls_p95_within_target"),
            ]
        )
    queries = "\n".join(f"- `{k}`: {v}" for k, v in (data.get("queries") or {}).items())
    size = data.get("data", {})
    return (
        f"{_number(size.get('metric_scores'))} metric_scores rows over {size.get('tenants')} tenants; "
        f"target p95 under {_number(data.get('target_p95_ms'))} ms. Timed: {data.get('timed')}.\n\n"
        + table(
            ["query", "RLS on: median / p95 ms", "RLS off: median / p95 ms", "ratio median / p95", "p95 on target"],
            rows,
        )
        + "\n"
        + queries
        + "\n"
    )


def _synthesis_throughput(data: dict) -> str:
    def row(label: str, s: dict, per_hour: Any, wall: Any) -> list[Any]:
        types = ", ".join(f"{k} {v}" for k, v in (s.get("type_mix_verified") or {}).items())
        rejected = ", ".join(f"{k} {v}" for k, v in (s.get("rejected_by_stage") or {}).items())
        return [
            label,
            wall,
            s.get("generated"),
            f"{s.get('verified')} ({_number(s.get('kept_rate'))})",
            types,
            f"{s.get('gold_in_top5_share', 0):.0%}",
            rejected,
            per_hour,
        ]

    offline, llm = data.get("offline", {}), data.get("llm")
    rows = [
        row(
            "offline, empty embedding cache",
            offline["cold"],
            offline["cold"]["verified_per_hour"],
            offline["cold"]["wall_s"],
        )
    ]
    warm = offline.get("warm_runs") or []
    if warm:
        walls = sorted(run["wall_s"] for run in warm)
        rows.append(
            row(
                f"offline, warm cache, median of {len(warm)}",
                warm[0],
                offline.get("warm_median_verified_per_hour"),
                walls[len(walls) // 2],
            )
        )
    if llm:
        rows.append(row(f"LLM: {llm.get('server', '')}", llm, llm["verified_per_hour"], llm["wall_s"]))
    return (
        f"Corpus `{data.get('corpus')}`; target: more than {data.get('sla_verified_per_hour')} verified pairs per hour "
        f"(offline met: {_number(offline.get('sla_met'))}).\n\n"
        + table(
            [
                "path",
                "wall s",
                "generated",
                "verified (kept rate)",
                "verified types",
                "gold chunk in top 5",
                "rejected by stage",
                "verified pairs per hour",
            ],
            rows,
        )
    )


def _ui_load(data: dict) -> str:
    pages = [("asset graph", "asset_graph"), ("`regression_report` page", "report"), ("peer: `/server_info`", "peer")]
    rows = [
        [
            label,
            f"{_number(data['cold'][k]['median_s'])} ({_number(data['cold'][k]['max_s'])})",
            f"{_number(data['warm'][k]['median_s'])} ({_number(data['warm'][k]['max_s'])})",
        ]
        for label, k in pages
    ]
    sla = ", ".join(f"{k} {v}" for k, v in (data.get("sla") or {}).items())
    load = _get(data, "machine", "load_average_1m") or {}
    return (
        f"Target: under {_number(data.get('sla_s'))} s; {data.get('runs')} loads each; Dagster {data.get('dagster')}, "
        f"Chromium {data.get('chromium')}; the lineage had {_get(data, 'lineage', 'assets')} assets and "
        f"{_get(data, 'lineage', 'edges')} edges then.\n\n"
        + table(["page", "cold: median (max) s", "warm: median (max) s"], rows)
        + f"\nTarget: {sla}. 1-minute load average {_number(load.get('before'))} before, "
        + f"{_number(load.get('after'))} after.\n"
    )


def _trace_lookup(data: dict) -> str:
    kinds = [
        ("trace link in Chromium, until the span tree shows", "ui_trace"),
        ("peer: `/healthz` in Chromium", "ui_peer"),
        ("REST lookup by trace id", "rest_trace"),
        ("peer: `/healthz` over HTTP", "rest_peer"),
    ]
    rows = [
        [label]
        + [f"{_number(data[mode][k]['median_s'])} ({_number(data[mode][k]['max_s'])})" for mode in ("cold", "warm")]
        for label, k in kinds
    ]
    sla = ", ".join(f"{k} {v}" for k, v in (data.get("sla") or {}).items())
    load = _get(data, "machine", "load_average_1m") or {}
    ratios = "; ".join(
        f"{mode}: UI {_number(r.get('ui_trace'))}, REST {_number(r.get('rest_trace'))}"
        for mode, r in (data.get("ratio_to_peer") or {}).items()
    )
    page, scripts = data.get("trace_page") or {}, _get(data, "cold", "ui_trace", "scripts_loaded_median_s")
    weight = (
        f"The trace page loads {_number(page.get('javascript_mb'))} MB of JavaScript "
        f"({_number(page.get('javascript_sent_mb'))} MB sent) and makes {_number(page.get('graphql_requests'))} "
        f"GraphQL requests; cold, its scripts had loaded after {_number(scripts)} s (median, browser clock).\n"
        if page
        else ""
    )
    return (
        f"Target: under {_number(data.get('sla_s'))} s; {data.get('runs')} lookups each; Phoenix {data.get('phoenix')} "
        f"(ready in {_number(data.get('phoenix_startup_s'))} s), Chromium {data.get('chromium')}; "
        f"{_number(data.get('spans'))} spans in {_number(2 * (data.get('traces_per_tenant') or 0))} traces of two "
        f"tenants; link `{data.get('trace_link')}`, REST `{data.get('rest_lookup')}`.\n\n"
        + table(["lookup", "cold: median (max) s", "warm: median (max) s"], rows)
        + f"\nRatio to the peer: {ratios}. Target: {sla}. 1-minute load average "
        + f"{_number(load.get('before'))} before, {_number(load.get('after'))} after. {weight}"
    )


def _tracing_overhead(data: dict) -> str:
    rows = [
        ["tracing off (peer)", _number(data["off_s"]["median"]), ", ".join(_number(t) for t in data["off_s"]["runs"])],
        ["tracing on", _number(data["on_s"]["median"]), ", ".join(_number(t) for t in data["on_s"]["runs"])],
    ]
    return (
        f"{data.get('what')}; {data.get('runs')} pairs, interleaved; {data.get('machine')}, {data.get('date')}.\n\n"
        + table(["`rag-eval gate`", "median s", "runs s"], rows)
        + f"\nRatio on/off: **{_number(data.get('ratio_on_to_off'))}** (target: {data.get('target')}); "
        + f"{_number(_get(data, 'spans_per_traced_gate', 'median'))} spans per traced gate.\n"
    )


def _vllm_judge_latency(data: dict) -> str:
    batches, single = data.get("seconds_per_triplet") or {}, data.get("single_triplet_s") or {}
    judge, server = data.get("judge") or {}, data.get("server") or {}
    target = data.get("sla_s_per_triplet")
    verdict = "not judged (stand-in run)" if data.get("stand_in") else ("met" if data.get("sla_met") else "not met")
    scored = ", ".join(f"{m} {o.get('scored')}" for m, o in (data.get("outcomes") or {}).items())
    rows = [
        [
            f"batches of {data.get('batch_size')}, {judge.get('concurrency')} calls in flight",
            batches.get("median"),
            batches.get("p95"),
            len(batches.get("values") or []),
        ],
        ["one triplet alone", single.get("median"), single.get("p95"), len(single.get("values") or [])],
    ]
    return (
        f"Server: {server.get('kind')} (ready in {_number(server.get('startup_s'))} s), "
        f"`{' '.join(server.get('argv') or [])}`; judge {judge.get('mode')}, `{judge.get('response_format')}`; "
        f"{data.get('triplets')} triplets; machine: GPU {_get(data, 'machine', 'gpu')}.\n\n"
        + table(["seconds per triplet", "median", "p95", "measurements"], rows)
        + f"\nTarget: under {_number(target)} s per triplet (p95 of the batches): **{verdict}**. "
        + f"Triplets scored per metric: {scored}.\n"
    )


def _flattened(data: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    if isinstance(data, dict) and depth < 4:
        return [pair for k, v in data.items() for pair in _flattened(v, f"{prefix}{k}.", depth + 1)]
    if isinstance(data, list):
        return (
            [(prefix.rstrip("."), f"{len(data)} values")]
            if data and not all(isinstance(v, (int, float)) for v in data)
            else [(prefix.rstrip("."), ", ".join(_number(v) for v in data))]
        )
    return [(prefix.rstrip("."), data if not isinstance(data, dict) else json.dumps(data))]


def _any_results(data: dict) -> str:
    """A results file no renderer knows yet: every number in it, by its path."""
    rows = [(_code(path), value) for path, value in _flattened(data) if "note" not in path]
    return table(["field", "value"], rows[:80]) + (
        f"\n({len(rows) - 80} more fields in the file.)\n" if len(rows) > 80 else ""
    )


# The renderer of each benchmark script's results (or of one results file, by its name); a script
# without one gets every field as a table.
RENDERERS: dict[str, Callable[[dict], str]] = {
    "celery_lineage": _celery_lineage,
    "chunk_clusters_wall_time": _chunk_clusters,
    "clustering_curve": _clustering_curve,
    "compare_commits": _compare_commits,
    "cost_vs_ragas": _cost_vs_ragas,
    "demo_first_run": _demo_first_run,
    "gate_wall_time": _gate_wall_time,
    "golden_quality": _golden_quality,
    "history_view": _history_view,
    "ingestion_furniture": _ingestion_furniture,
    "judge_abstention": _judge_abstention,
    "judge_accuracy": _judge_accuracy,
    "judge_calibration": _judge_calibration,
    "lineage_run": _lineage_run,
    "ppi_coverage": _ppi_coverage,
    "rls_scores": _rls_scores,
    "service_gate": _service_gate,
    "suite_time": _compare_commits,  # written by compare_commits.py --suite-only
    "synthesis_throughput": _synthesis_throughput,
    "trace_lookup": _trace_lookup,
    "tracing_overhead": _tracing_overhead,
    "ui_load": _ui_load,
    "vllm_judge_latency": _vllm_judge_latency,
}


def _notes(data: dict) -> str:
    """The caveats a results file carries itself (its `what` and `note*` fields), quoted."""
    notes = [
        f"*{key}:* {data[key]}"
        for key in data
        if (key == "what" or key.startswith("note")) and isinstance(data[key], str)
    ]
    return "".join(f"\n> {' '.join(note.split())}\n" for note in notes)


def figure_fragment(result: Path) -> str:
    data = json.loads(result.read_text(encoding="utf-8"))
    script = benchmark_script(result)
    render = RENDERERS.get(result.stem) or RENDERERS.get(script.stem if script else "", _any_results)
    source = f"Results: `{result.relative_to(REPO).as_posix()}`"
    if last := _last_commit(result):
        source += f" (committed {last})"
    commands = reproduce_commands(result, data)
    reproduce = "\n\nReproduce:\n\n```bash\n" + "\n".join(commands) + "\n```\n" if commands else ""
    if not commands:
        reproduce = "\n\nReproduce: see the docstring of the script that wrote it.\n"
    return f"{source}.{reproduce}\n{render(data)}{_notes(data)}"


def result_files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


# -- writing --------------------------------------------------------------------------------------------


def pages(with_dagster: bool = True) -> dict[str, str]:
    """Every generated file, by its path under docs/generated/."""
    banner = "<!-- Generated by scripts/build_docs.py from the code and benchmarks/results/; do not edit. -->\n\n"
    out = {
        "configuration.md": configuration_table(),
        "configuration-judge.md": configuration_table("judge."),
        "configuration-production.md": configuration_table("production."),
        "configuration-service.md": configuration_table("service."),
        "configuration-vllm.md": configuration_table("vllm."),
        "configuration-elsewhere.md": elsewhere_table(),
        "layout.md": layout_page(),
        "layout-beside.md": beside_package_page(),
    }
    if with_dagster:
        out["dagster-config.md"] = dagster_config_page()
    out.update({f"figures/{result.stem}.md": figure_fragment(result) for result in result_files()})
    return {name: banner + text for name, text in out.items()}


def write(generated: dict[str, str], folder: Path = GENERATED) -> None:
    """Write each page only if it changed (so `mkdocs serve` does not rebuild for ever); drop pages gone."""
    for name, text in generated.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for path in folder.rglob("*.md"):
        if path.relative_to(folder).as_posix() not in generated:
            path.unlink()


def on_pre_build(config: Any) -> None:
    """mkdocs hook: regenerate the pages before every build."""
    write(pages())


if __name__ == "__main__":
    write(pages())
    print(f"wrote {GENERATED.relative_to(REPO)}/")
