"""`rag-eval serve` (the gate service) and `rag-eval token new-key|issue` (its local tokens)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import settings


def _policy():
    from rag_eval_pipeline.service.tokens import TokenPolicy

    current = settings().service
    return TokenPolicy(current.issuer, current.audience, current.tenant_claim)


def _local_key() -> bytes:
    from rag_eval_pipeline.service.tokens import read_key

    key_file = settings().service.token_key_file
    if key_file is None:
        raise BadInput("RAG_EVAL_TOKEN_KEY_FILE is not set: `rag-eval token new-key --out FILE` writes a key")
    return read_key(key_file)


@click.command(help="run the gate service: the HTTP API tenants' CI jobs reach with a token (OpenAPI at /docs)")
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to listen on")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> int:
    import uvicorn

    from rag_eval_pipeline.service.app import create_app, log_audit_to_stderr
    from rag_eval_pipeline.service.tokens import TokenVerifier

    current = settings()
    if current.service.jwks_url and current.service.token_key_file:
        raise BadInput("set RAG_EVAL_TOKEN_KEY_FILE or RAG_EVAL_AUTH_JWKS_URL, not both: one source of trusted keys")
    key = None if current.service.jwks_url else _local_key()
    verifier = TokenVerifier(_policy(), key=key, jwks_url=current.service.jwks_url)
    log_audit_to_stderr()
    click.echo(f"gate service on http://{host}:{port} (tenants from verified tokens only)", err=True)
    uvicorn.run(create_app(current, verifier), host=host, port=port, log_level="warning", access_log=False)
    return 0


@click.group(help="the gate service's local tokens (HS256, one machine; production uses an identity provider)")
def token() -> None:
    pass


@token.command(name="new-key", help="write a new random signing key to a file only its owner can read")
@click.option("--out", required=True, type=click.Path(path_type=Path))
def new_key(out: Path) -> int:
    from rag_eval_pipeline.service.tokens import new_key as fresh_key

    try:
        descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never replaces a key in use
    except FileExistsError:
        raise BadInput(
            f"{out} exists: a new key would invalidate every token signed with it; remove it first"
        ) from None
    with os.fdopen(descriptor, "w") as handle:
        handle.write(fresh_key() + "\n")
    click.echo(f"signing key written to {out}; set RAG_EVAL_TOKEN_KEY_FILE={out.resolve()} for the service")
    return 0


@token.command(help="print a token for one tenant, signed with RAG_EVAL_TOKEN_KEY_FILE")
@click.option("--tenant", required=True)
@click.option(
    "--scope",
    default="read,gate",
    show_default=True,
    help="comma-separated: read, gate, promote, review (a CI job's token: read,gate)",
)
@click.option("--ttl", default="30d", show_default=True, help="how long it is valid: 90s, 15m, 12h, 30d")
@click.option("--subject", default="", help="who holds it, for the audit log (default: <tenant>-ci)")
def issue(tenant: str, scope: str, ttl: str, subject: str) -> int:
    from rag_eval_pipeline.service.tokens import issue as sign
    from rag_eval_pipeline.service.tokens import parse_scopes, parse_ttl

    click.echo(sign(_local_key(), _policy(), tenant, parse_scopes(scope), parse_ttl(ttl), subject))
    return 0
