"""`rag-eval history`: a tenant's metric history, each metric over its latest audits, as one HTML file.

Promotions are marked, blocked commits highlighted, the tolerance band around the baseline drawn, and every
point links to its report (reporting/history.py). The file needs nothing else to open: no script, no
network. With RAG_EVAL_SERVER and RAG_EVAL_TOKEN set, the gate service builds it from the tenant's own rows
(a `read` token is enough) and each point links to the service's report URL of its run.
"""

from __future__ import annotations

from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import settings

DEFAULT_LIMIT = 100  # as reporting.history.DEFAULT_LIMIT (imported only when the command runs)


@click.command(
    help="write a tenant's metric history (each metric over its latest audits, promotions and blocked commits "
    "marked, each point linking to its report) as one self-contained HTML file, and print its path"
)
@click.option("--tenant", required=True)
@click.option("--version", help="golden-set version (default: the tenant's latest published one)")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="how many of the latest audits to show (at most 10,000)",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="the .html file to write (default: history-<tenant>.html in the current folder)",
)
def history(tenant: str, version: str | None, limit: int, out: Path | None) -> int:
    from rag_eval_pipeline.core.names import validate_name

    tenant = validate_name("tenant", tenant)
    if version:
        validate_name("dataset version", version)
    out = out or Path(f"history-{tenant}.html")
    if out.suffix.lower() not in (".html", ".htm"):
        raise BadInput(f"--out {out} must name an .html file (the history is one HTML page)")
    if settings().service.remote:
        html, summary = _from_service(tenant, version, limit)
    else:
        html, summary = _built_here(tenant, version, limit)
    _write(out, html)
    click.echo(summary)
    click.echo(str(out.resolve()))
    return 0


def _write(path: Path, text: str) -> None:
    """Written beside, then renamed into place (as core.files does, without importing pandas: through the
    service this command needs nothing heavier than an HTTP client)."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _built_here(tenant: str, version: str | None, limit: int) -> tuple[str, str]:
    from rag_eval_pipeline.cli.options import stores
    from rag_eval_pipeline.reporting.history import render_history_html, summary_line, tenant_history

    opened = stores()
    built = tenant_history(opened.results, opened.baselines, tenant, version, limit, settings().judge.price_table)
    return render_history_html(built), summary_line(built)


def _from_service(tenant: str, version: str | None, limit: int) -> tuple[str, str]:
    from rag_eval_pipeline.cli.remote import service

    params: dict = {"limit": limit, **({"version": version} if version else {})}
    html, headers = service().get_text(f"/v1/tenants/{tenant}/history", params=params)
    return html, headers.get("x-rag-eval-summary", f"metric history of {tenant}")
