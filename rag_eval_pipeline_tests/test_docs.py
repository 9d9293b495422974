"""The documentation cannot go stale: what the docs generate covers the code, and the README stays short.

The strict site build itself (`make docs`: broken links and anchors fail it) runs in CI; these checks
are plain Python and take a second.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from pydantic import BaseModel

from rag_eval_pipeline import settings

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
README_LIMIT_BYTES = 12 * 1024
SNIPPET = re.compile(r'^\s*--8<--\s+"generated/([^"]+)"\s*$', re.MULTILINE)


def _load_build_docs():
    spec = importlib.util.spec_from_file_location("build_docs", REPO / "scripts" / "build_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build_docs():
    return _load_build_docs()


def _leaf_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, object]]:
    """Every leaf of the settings, read from the models (not from the generator)."""
    for name, info in model.model_fields.items():
        nested = [a for a in (typing.get_args(info.annotation) or (info.annotation,)) if isinstance(a, type)]
        models = [a for a in nested if issubclass(a, BaseModel)]
        if models:
            yield from _leaf_fields(models[0], f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def _table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| `")]


def test_every_settings_field_has_a_description() -> None:
    missing = [path for path, info in _leaf_fields(settings.Settings) if not (info.description or "").strip()]
    assert missing == [], f"settings fields without Field(description=...): {missing}"


def test_configuration_table_has_a_row_for_every_settings_field(build_docs) -> None:
    rows = _table_rows(build_docs.configuration_table())
    for path, info in _leaf_fields(settings.Settings):
        matching = [row for row in rows if row.rstrip().endswith(f"| `{path}` |")]
        assert len(matching) == 1, f"settings field {path} has {len(matching)} rows in the configuration table"
        row = matching[0]
        assert re.match(r"^\| `(RAG_EVAL_[A-Z_]+|DAGSTER_HOME)` \|", row), f"{path} has no variable: {row}"
        assert " ".join(info.description.split()) in row


class _RecordingEnviron(Mapping):
    """An empty environment that remembers every variable asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_configuration_table_names_every_variable_the_settings_read(build_docs, tmp_path: Path) -> None:
    environ = _RecordingEnviron()
    settings.load(environ=environ, cwd=tmp_path)
    assert "RAG_EVAL_JUDGE" in environ.asked  # the recording works
    table = build_docs.configuration_table()
    undocumented = sorted(v for v in environ.asked if f"| `{v}` |" not in table)
    assert undocumented == [], f"read by settings.load() but not in the configuration table: {undocumented}"


def test_configuration_defaults_are_what_load_gives(build_docs, tmp_path: Path) -> None:
    rows = {row.path: row for row in build_docs.configuration_rows()}
    loaded = settings.load(environ={}, cwd=tmp_path)
    assert rows["documents_root"].default == "`./data/tenants`"
    assert rows["judge.timeout_s"].default == f"`{loaded.judge.timeout_s}`"
    assert rows["judge.cache"].default == "`./warehouse/judge_cache.sqlite`"
    assert rows["run_stale_after_s"].default == f"`{loaded.run_stale_after_s}`"
    assert rows["followed_branch.repo"].default == "unset"
    assert rows["followed_branch.branch"].default == "`main`"


def _packages() -> list[Path]:
    return sorted(p.parent for p in (REPO / "rag_eval_pipeline").rglob("__init__.py"))


def test_every_package_has_a_docstring_and_a_section_in_the_layout(build_docs) -> None:
    layout = build_docs.layout_page()
    for package in _packages():
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
        dotted = ".".join(package.relative_to(REPO).parts)
        assert len(docstring.split()) >= 8, f"{dotted}: its __init__.py needs a docstring saying what lives there"
        assert f"### `{dotted}`" in layout


def test_every_module_has_a_docstring_and_a_row_in_the_layout(build_docs) -> None:
    layout = build_docs.layout_page()
    for module in sorted((REPO / "rag_eval_pipeline").rglob("*.py")):
        if module.name == "__init__.py":
            continue
        docstring = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8")))
        assert docstring, f"{module.relative_to(REPO)} has no docstring"
        assert f"| `{module.name}` | {' '.join(docstring.split(chr(10) * 2)[0].split())}" in layout.replace("\\|", "|")


def test_every_results_file_renders_with_a_reproducing_command(build_docs) -> None:
    results = sorted((REPO / "benchmarks" / "results").glob("*.json"))
    assert results
    for result in results:
        fragment = build_docs.figure_fragment(result)
        assert f"`benchmarks/results/{result.name}`" in fragment
        assert "benchmarks/" in fragment.split("Reproduce", 1)[1], f"{result.name}: no command reproduces it"
        assert "\n|---" in fragment, f"{result.name}: no table"


def test_every_generated_page_is_embedded_and_every_embed_exists(build_docs) -> None:
    embedded = {name for page in DOCS.glob("*.md") for name in SNIPPET.findall(page.read_text(encoding="utf-8"))}
    generated = set(build_docs.pages(with_dagster=False)) | {"dagster-config.md"}
    assert sorted(generated - embedded) == [], (
        "generated pages no docs page embeds (a new results file needs a section in docs/figures.md)"
    )
    assert sorted(embedded - generated) == [], "docs pages embed generated pages that no longer exist"


def test_readme_is_short_and_its_quickstart_has_exactly_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= README_LIMIT_BYTES, (
        "the README grew past 12 KiB: move reference material to docs/"
    )
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", quickstart, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]


def _slug(heading: str) -> str:
    """GitHub's and Python-Markdown's anchor for a plain heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_links_point_at_files_and_headings_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"^[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local)
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO / path if path else README
        assert target.is_file(), f"README links to {link}, which does not exist"
        if anchor and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"README links to {link}: no such heading"


CODE_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]*)`")
# Paths the docs name that live outside the repository or are made at run time.
NOT_IN_THE_REPO = ("../", "/", "warehouse/", "candidates/", ".dagster_home/", "site/", "docs/generated/", "dagster/")


def test_files_and_folders_the_docs_name_exist() -> None:
    """A module moved or renamed must take its mentions in the docs along (mkdocs checks links, not code spans)."""
    roots = [REPO, REPO / "rag_eval_pipeline", REPO / "rag_eval_pipeline_tests"]
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for path in CODE_PATH.findall(page.read_text(encoding="utf-8")):
            if path.startswith(NOT_IN_THE_REPO):
                continue
            assert any((root / path).exists() for root in roots), (
                f"{page.relative_to(REPO)} names {path}, which does not exist"
            )
