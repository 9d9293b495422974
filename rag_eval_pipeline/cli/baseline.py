"""`rag-eval baseline show|promote`: a tenant's baseline history, and an explicit promotion.

A promotion names a commit that was already audited on the golden-set version: its archived scores
become what later candidates are compared with, without running it again.
"""

from __future__ import annotations

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.lineage import min_coverage_option
from rag_eval_pipeline.cli.options import settings, stores


def _store():
    opened = stores()
    return opened.results, opened.baselines


@click.group(help="show a tenant's baseline history, or promote an audited commit", no_args_is_help=False)
def baseline() -> None:
    pass


@baseline.command(help="every promotion, oldest first, and the audited commits")
@click.option("--tenant", required=True)
@click.option("--version", help="only this golden-set version")
def show(tenant: str, version: str | None) -> int:
    if settings().service.remote:
        from rag_eval_pipeline.cli.remote import service

        answer = service().get(f"/v1/tenants/{tenant}/baselines", params={"version": version} if version else None)
        promotions = [
            (p["promoted_at"], p["version"], p["commit"], p["reason"], p["branch"]) for p in answer["promotions"]
        ]
        audited = answer["audited"]
    else:
        _, store = _store()
        history = store.history(tenant, version)
        promotions = [(str(p.promoted_at), p.version, p.commit, p.reason, p.branch) for p in history]
        versions = [version] if version else sorted({p.version for p in history})
        audited = {shown: store.audited_commits(tenant, shown) for shown in versions}
    if not promotions:
        click.echo(f"tenant {tenant!r} has no baseline yet" + (f" on version {version!r}" if version else ""))
    for promoted_at, promoted_version, commit, reason, branch in promotions:
        click.echo(
            f"{promoted_at}  {promoted_version}  {commit}  {reason}" + (f"  (branch {branch})" if branch else "")
        )
    for shown, commits in audited.items():
        click.echo(f"audited on {shown}: {', '.join(commits) or 'none'}")
    return 0


@baseline.command(help="make an audited commit the baseline")
@click.option("--tenant", required=True)
@click.option("--commit", required=True)
@click.option("--version", help="golden-set version (default: the tenant's latest published one)")
@min_coverage_option
def promote(tenant: str, commit: str, version: str | None, min_coverage: float) -> int:
    if settings().service.remote:
        from rag_eval_pipeline.cli.remote import finish, service

        body = {"commit": commit, "version": version, "min_coverage": min_coverage}
        return finish(service().post(f"/v1/tenants/{tenant}/baselines", body))
    from rag_eval_pipeline.reporting.baselines import EXPLICIT
    from rag_eval_pipeline.synthesis.versions import latest_version

    warehouse, store = _store()
    version = version or latest_version(warehouse, tenant)
    if version is None:
        raise BadInput(f"tenant {tenant!r} has no published golden set yet")
    _require_measured(store, tenant, version, commit, min_coverage)
    promotion = store.promote(tenant, version, commit, EXPLICIT)
    click.echo(f"{promotion.commit} is now the baseline of {tenant}/{version} ({promotion.reason})")
    return 0


def _require_measured(store, tenant: str, version: str, commit: str, min_coverage: float) -> None:
    """A baseline is what later candidates are measured against: every metric that applies must have been
    measured on at least min_coverage of its items."""
    from rag_eval_pipeline.reporting.compare import UNMEASURED_ROW, compare

    scores, _ = store.audited(tenant, version, commit)  # refuses a commit never audited, naming the audited ones
    comparison = compare(scores, None, min_coverage=min_coverage)
    if not comparison.measured_enough:
        short = comparison.table[comparison.table["verdict"] == UNMEASURED_ROW]
        details = "; ".join(f"{m}: {n}" for m, n in zip(short["metric"], short["note"])) or "nothing was measured"
        raise BadInput(
            f"{commit} was measured on too few items to be the baseline of {tenant}/{version} ({details}); "
            "re-audit it with a working judge, or lower --min-coverage"
        )
