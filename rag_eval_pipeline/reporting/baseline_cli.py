"""`rag-eval baseline show|promote`: a tenant's baseline history, and an explicit promotion.

A promotion names a commit that was already audited on the golden-set version: its archived scores
become what later candidates are compared with, without running it again.
"""

from __future__ import annotations

from rag_eval_pipeline import settings
from rag_eval_pipeline.command_errors import exit_2_on_bad_input
from rag_eval_pipeline.reporting.baselines import EXPLICIT, BaselineStore
from rag_eval_pipeline.synthesis.versions import latest_version
from rag_eval_pipeline.core.warehouse import Warehouse


def add_commands(subparsers) -> None:
    baseline = subparsers.add_parser("baseline", help="show a tenant's baseline history, or promote an audited commit")
    actions = baseline.add_subparsers(dest="baseline_action", metavar="{show,promote}", required=True)

    show = actions.add_parser("show", help="every promotion, oldest first, and the audited commits")
    show.add_argument("--tenant", required=True)
    show.add_argument("--version", help="only this golden-set version")
    show.set_defaults(handler=exit_2_on_bad_input(_show))

    promote = actions.add_parser("promote", help="make an audited commit the baseline")
    promote.add_argument("--tenant", required=True)
    promote.add_argument("--commit", required=True)
    promote.add_argument("--version", help="golden-set version (default: the tenant's latest published one)")
    promote.set_defaults(handler=exit_2_on_bad_input(_promote))


def _store() -> tuple[Warehouse, BaselineStore]:
    warehouse = Warehouse(settings.warehouse_root())
    return warehouse, BaselineStore(warehouse)


def _show(args) -> int:
    _, store = _store()
    history = store.history(args.tenant, args.version)
    if not history:
        print(f"tenant {args.tenant!r} has no baseline yet" + (f" on version {args.version!r}" if args.version else ""))
    for promotion in history:
        print(f"{promotion.promoted_at}  {promotion.version}  {promotion.commit}  {promotion.reason}"
              + (f"  (branch {promotion.branch})" if promotion.branch else ""))
    versions = [args.version] if args.version else sorted({p.version for p in history})
    for version in versions:
        print(f"audited on {version}: {', '.join(store.audited_commits(args.tenant, version)) or 'none'}")
    return 0


def _promote(args) -> int:
    warehouse, store = _store()
    version = args.version or latest_version(warehouse, args.tenant)
    if version is None:
        raise ValueError(f"tenant {args.tenant!r} has no published golden set yet")
    promotion = store.promote(args.tenant, version, args.commit, EXPLICIT)
    print(f"{promotion.commit} is now the baseline of {args.tenant}/{version} ({promotion.reason})")
    return 0
