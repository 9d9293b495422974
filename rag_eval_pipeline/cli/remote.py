"""The CLI as the gate service's client: with RAG_EVAL_SERVER and RAG_EVAL_TOKEN set, `rag-eval gate`,
`questions`, `baseline`, `review` and `history` send their request to the service and print what it answers.

A tenant's CI job then holds only the token: no database, Dagster, cache or object-store credential.
The commands the service runs for the caller come back with their own output and exit status, which
are printed and returned as they are; a refusal (no or bad token, another tenant, a missing scope) or
an unreachable service is one line and exit 2, as any bad input.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import httpx

from rag_eval_pipeline.cli.errors import BadInput
from rag_eval_pipeline.cli.options import settings

CONNECT_TIMEOUT_S = 10.0
POLL_WAIT_S = 60.0  # each poll of a gate waits this long on the service for the verdict


class Service:
    """The gate service at RAG_EVAL_SERVER, called with the bearer token RAG_EVAL_TOKEN."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(POLL_WAIT_S + 30, connect=CONNECT_TIMEOUT_S),
        )

    def get(self, path: str, params: dict | None = None) -> dict:
        return self._call("GET", path, params=params)

    def post(self, path: str, body: dict, params: dict | None = None) -> dict:
        return self._call("POST", path, json=body, params=params)

    def get_text(self, path: str, params: dict | None = None) -> tuple[str, httpx.Headers]:
        """A page the service answers as text (an HTML page), with its response headers."""
        response = self._response("GET", path, params=params)
        return response.text, response.headers

    def _call(self, method: str, path: str, **request) -> dict:
        return self._response(method, path, **request).json()

    def _response(self, method: str, path: str, **request) -> httpx.Response:
        try:
            response = self._client.request(method, path, **request)
        except httpx.HTTPError as error:
            raise BadInput(f"cannot reach the gate service at {self.url} (RAG_EVAL_SERVER): {error}") from None
        if response.status_code >= 400:
            raise BadInput(f"the gate service refused ({response.status_code}): {_detail(response)}")
        return response


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    if isinstance(detail, list):  # FastAPI's validation errors: the first one says enough
        detail = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail[:3])
    return str(detail or response.text[:200] or response.reason_phrase)


def service() -> Service:
    current = settings().service
    return Service(current.server_url, current.token)


def finish(outcome: dict, files: dict[str, Path] | None = None) -> int:
    """Write the files a command wrote where the caller asked, print its output as the service ran it (the
    service names the caller's paths in it); its exit status."""
    from rag_eval_pipeline.core.files import atomic_write_text

    for name, path in (files or {}).items():
        if name in outcome.get("files", {}):
            atomic_write_text(path, outcome["files"][name])
    click.echo(outcome.get("stdout", ""), nl=False)
    click.echo(outcome.get("stderr", ""), nl=False, err=True)
    return int(outcome["exit_code"])


def gate(tenant: str, commit: str, outputs: str | None, junit: Path | None, **options) -> int:
    """`rag-eval gate` through the service: submit, then wait (polling) for the verdict."""
    body: dict = {"commit": commit, "junit": junit is not None, "junit_name": str(junit or ""), **options}
    if outputs:
        try:
            body["outputs_jsonl"] = Path(outputs).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise BadInput(f"cannot read --outputs {outputs}: {error}") from None
        body["outputs_name"] = outputs
    client = service()
    outcome = client.post(f"/v1/tenants/{tenant}/gates", body, params={"wait": POLL_WAIT_S})
    while outcome["state"] != "finished":
        time.sleep(0.05)  # the service itself waits up to POLL_WAIT_S per request
        outcome = client.get(f"/v1/tenants/{tenant}/gates/{outcome['id']}", params={"wait": POLL_WAIT_S})
    return finish(outcome, {"junit.xml": junit} if junit else None)
