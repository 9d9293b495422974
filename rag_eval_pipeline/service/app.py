"""The gate service: the only door for tenants (`rag-eval serve`; OpenAPI at /docs and /openapi.json).

Every route is under /v1/tenants/{tenant}/ and needs a bearer token whose verified claims name that
tenant and grant the route's scope; the tenant every store, query and child command uses is the
token's, never a value the caller sent. A refusal (401 no or bad token, 403 another tenant or a
missing scope) reads and writes nothing and leaves one line in the audit log, as every allowed request
does. Reads (questions, baselines, reports, the metric history) answer from the stores in this process,
through the token's tenant-scoped transaction; gates, promotions and reviews run as `rag-eval` commands
in child processes (commands.py), so they print and exit exactly as on the operator's machine.
"""

import asyncio
import contextlib
import functools
import logging
import re
import sys
from typing import Annotated, Literal, NoReturn

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field, field_validator

from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE
from rag_eval_pipeline.service.commands import FINISHED, CommandResult, CommandRunner, File, Job
from rag_eval_pipeline.service.tokens import GATE, PROMOTE, READ, REVIEW, Caller, TokenRejected, TokenVerifier
from rag_eval_pipeline.settings import Settings

AUDIT_LOGGER = "rag_eval_pipeline.service.audit"
MAX_WAIT_S = 300.0  # the longest one request holds a connection waiting for a verdict; the caller polls again
NAME = r"^[a-z0-9_-]{1,63}$"  # a tenant or version name, as core.names accepts it
RUN_ID = r"^[A-Za-z0-9_-]{1,64}$"  # a run id, as core.names accepts it
TENANT_PATH = re.compile(r"^/v1/tenants/([^/]*)(?:/|$)")
MAX_BODY_BYTES = 80 * 2**20  # a gate's answers may hold 64 MiB (as an outputs file may), JSON-escaped
MAX_HISTORY = 10_000  # the most audits one history shows (stores.layout.MAX_REPORTS)

audit = logging.getLogger(AUDIT_LOGGER)
_bearer = HTTPBearer(auto_error=False)


class CommandOutcome(BaseModel):
    """What a `rag-eval` command run for the caller printed, its exit status and the files it wrote."""

    state: str = Field(description="queued, running or finished")
    id: str = Field(default="", description="the job's id, to poll a gate")
    exit_code: int | None = Field(default=None, description="as the CLI's: 0 pass/done, 1 regression, 2 error")
    stdout: str = ""
    stderr: str = ""
    files: dict[str, str] = Field(default_factory=dict)


class _Request(BaseModel):
    """A request body: every text must be valid Unicode (a lone surrogate cannot be written to a file)."""

    @field_validator("*")
    @classmethod
    def _unicode(cls, value):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("must be valid Unicode text (it holds a lone surrogate)") from None
        return value


class GateRequest(_Request):
    commit: str = Field(description="the candidate's commit")
    outputs_jsonl: str | None = Field(
        default=None, description="the candidate's answers, one JSON object per line; none: the reference candidate"
    )
    outputs_name: str = Field(default="outputs.jsonl", description="the file's name, for messages")
    version: str | None = None
    baseline: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    min_coverage: float = DEFAULT_MIN_COVERAGE
    branch: str = ""
    main_branch: str = "main"
    junit: bool = Field(default=False, description="also return the verdict per metric as JUnit XML")
    junit_name: str = Field(default="junit.xml", description="where the caller writes it, for messages")
    rescore_baseline: bool = True
    decide_on: Literal["judge", "ppi"] = Field(
        default="judge", description="the judge's own deltas, or prediction-powered intervals (needs labels)"
    )


class PromotionRequest(_Request):
    commit: str
    version: str | None = None
    min_coverage: float = DEFAULT_MIN_COVERAGE


class ReviewImportRequest(_Request):
    version: str | None = Field(default=None, description="the reviewed version (a golden-set review sheet only)")
    new_version: str | None = Field(default=None, description="the version it makes (a golden-set review sheet only)")
    sheet: str = Field(description="the filled-in review sheet's text, or an audit sheet's (its labels are stored)")
    sheet_name: str = Field(default="review.jsonl", description="its file name: .jsonl or .csv")


class Question(BaseModel):
    qa_id: str
    question: str


class Questions(BaseModel):
    tenant: str
    version: str
    items: list[Question]


class Promotion(BaseModel):
    promoted_at: str
    version: str
    commit: str
    reason: str
    branch: str


class BaselineHistory(BaseModel):
    tenant: str
    promotions: list[Promotion]
    audited: dict[str, list[str]] = Field(description="the audited commits per version")


def create_app(settings: Settings, verifier: TokenVerifier) -> FastAPI:
    """The service over these settings' stores and credentials, checking tokens with verifier."""
    runner_holder: dict[str, CommandRunner] = {}

    def runner() -> CommandRunner:  # created in the server's event loop, on first use
        if "runner" not in runner_holder:
            runner_holder["runner"] = CommandRunner(
                settings.service.max_gates,
                settings.service.warm_children,
                timeout_s=settings.production.run_timeout_s + settings.run_stale_after_s + 600,
                hidden={str(settings.warehouse_root): "<warehouse>"},  # the operator's disk is not the tenant's
            )
        return runner_holder["runner"]

    @contextlib.asynccontextmanager
    async def warm_before_the_first_request(_: FastAPI):
        runner().warm_up()
        yield
        await runner().close()

    app = FastAPI(
        title="rag-eval gate service",
        version="1",
        description="Gate a candidate commit against its tenant's baseline; the tenant comes from the token.",
        lifespan=warm_before_the_first_request,
    )

    @functools.cache
    def stores():
        from rag_eval_pipeline.stores import open_stores

        return open_stores(settings.warehouse_root, settings.production.database_url)

    @app.middleware("http")
    async def door(request: Request, call_next):
        """Who the caller is, checked before anything of the request is read: a refusal costs no body."""
        tenant = TENANT_PATH.match(request.url.path)
        if tenant is None:  # the OpenAPI document and its pages
            return await call_next(request)
        try:
            request.state.caller = _identify(verifier, request, tenant.group(1))
            _require_small_body(request)
        except HTTPException as refused:
            return _one_line(refused)
        return await call_next(request)

    def caller(scope: str):
        def check(
            request: Request,
            tenant: Annotated[str, Path()],
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],  # for the OpenAPI document
        ) -> Caller:
            who: Caller = request.state.caller  # verified by the door, for this very tenant
            try:
                who.require(scope)
            except TokenRejected as rejected:
                _refuse(rejected.status, rejected.reason, _where(request), who)
            audit.info("allowed %s tenant=%s subject=%s scope=%s", _where(request), who.tenant, who.subject, scope)
            return who

        return check

    reader, gater, promoter, reviewer = (Depends(caller(s)) for s in (READ, GATE, PROMOTE, REVIEW))
    version_query = Query(default=None, pattern=NAME, description="default: the tenant's latest published version")

    @app.get("/v1/tenants/{tenant}/questions", response_model=Questions, tags=["golden set"])
    def questions(who: Annotated[Caller, reader], version: str | None = version_query) -> Questions:
        """The published golden set's questions, for a CI job to answer (no ground truths: those need `review`)."""
        from rag_eval_pipeline.synthesis.versions import published_questions

        chosen, frame = _answered(lambda: published_questions(stores().results, who.tenant, version))
        items = [Question(qa_id=str(q), question=str(t)) for q, t in zip(frame["qa_id"], frame["question"])]
        return Questions(tenant=who.tenant, version=chosen, items=items)

    @app.post("/v1/tenants/{tenant}/gates", response_model=CommandOutcome, status_code=202, tags=["gate"])
    async def start_gate(
        who: Annotated[Caller, gater], body: GateRequest, wait: Annotated[float, Query(ge=0)] = 0.0
    ) -> CommandOutcome:
        """Audit a commit's outputs against the baseline (`rag-eval gate`); wait up to `wait` s for the verdict."""
        if runner().active(who.tenant) >= settings.service.max_gates_per_tenant:
            raise HTTPException(
                429,
                f"tenant {who.tenant} has {settings.service.max_gates_per_tenant} gates queued or running "
                "(RAG_EVAL_SERVICE_MAX_GATES_PER_TENANT): wait for one to finish",
            )
        # Only a token that may promote may gate on a followed branch: there a pass moves the baseline.
        followed = body.main_branch if PROMOTE in who.scopes else ""
        options = _gate_options(body, followed)
        args: list[str | File] = ["gate", f"--tenant={who.tenant}", f"--candidate={body.commit}", *options]
        inputs = {"outputs.jsonl": body.outputs_jsonl} if body.outputs_jsonl is not None else {}
        if inputs:
            args += ["--outputs", File("outputs.jsonl")]
        shown = {"outputs.jsonl": body.outputs_name, "junit.xml": body.junit_name or "junit.xml"}
        job = runner().start(who.tenant, args, inputs, ("junit.xml",), shown)
        return await _waited(job, wait)

    @app.get("/v1/tenants/{tenant}/gates/{job_id}", response_model=CommandOutcome, tags=["gate"])
    async def gate_status(
        who: Annotated[Caller, gater], job_id: str, wait: Annotated[float, Query(ge=0)] = 0.0
    ) -> CommandOutcome:
        """A gate this tenant started: queued, running, or its verdict."""
        job = runner().job(who.tenant, job_id)
        if job is None:
            raise HTTPException(404, f"no gate {job_id} of tenant {who.tenant}")
        return await _waited(job, wait)

    @app.get("/v1/tenants/{tenant}/versions/{version}/runs/{run_id}/report", tags=["gate"])
    def report(
        who: Annotated[Caller, reader],
        version: Annotated[str, Path(pattern=NAME)],
        run_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")],
        format: Literal["markdown", "html", "junit"] = "markdown",
    ):
        """The regression report of one audit of this tenant, as Markdown, HTML or JUnit XML."""
        from rag_eval_pipeline.reporting.junit import junit_xml

        store = stores().results
        if format == "junit":
            table = store.read_audit_table(who.tenant, version, run_id, "regression_report")
            if table is None or table.empty:
                raise HTTPException(404, f"no report of run {run_id} on {who.tenant}/{version}")
            return PlainTextResponse(
                junit_xml(table, f"rag-eval gate {who.tenant}/{version}"), media_type="application/xml"
            )
        stored = store.read_report(who.tenant, version, run_id)
        if stored is None:
            raise HTTPException(404, f"no report of run {run_id} on {who.tenant}/{version}")
        if format == "html":
            return PlainTextResponse(stored.html, media_type="text/html")
        return PlainTextResponse(stored.markdown, media_type="text/markdown")

    @app.get("/v1/tenants/{tenant}/history", tags=["history"])
    def history(
        who: Annotated[Caller, reader],
        request: Request,
        version: str | None = version_query,
        limit: Annotated[int, Query(ge=1, le=MAX_HISTORY)] = 100,
        format: Literal["html", "json"] = "html",
    ):
        """The tenant's metric history (`rag-eval history`): each metric over its latest `limit` audits, as one
        self-contained HTML page whose points link to this service's report of each run, or as JSON."""
        from rag_eval_pipeline.reporting.history import render_history_html, summary_line, tenant_history

        base = str(request.base_url).rstrip("/")

        def link(chosen: str, audit) -> str:
            return f"{base}/v1/tenants/{who.tenant}/versions/{chosen}/runs/{audit.run_id}/report?format=html"

        built = _answered(
            lambda: tenant_history(
                stores().results, stores().baselines, who.tenant, version, limit, settings.judge.price_table, link
            )
        )
        if format == "json":
            return JSONResponse(built.as_dict())
        return PlainTextResponse(
            render_history_html(built), media_type="text/html", headers={"X-Rag-Eval-Summary": summary_line(built)}
        )

    @app.get("/v1/tenants/{tenant}/baselines", response_model=BaselineHistory, tags=["baseline"])
    def baselines(who: Annotated[Caller, reader], version: str | None = version_query) -> BaselineHistory:
        """Every promotion, oldest first, and the commits audited per version."""
        store = stores().baselines
        history = store.history(who.tenant, version)
        versions = [version] if version else sorted({p.version for p in history})
        return BaselineHistory(
            tenant=who.tenant,
            promotions=[
                Promotion(
                    promoted_at=str(p.promoted_at),
                    version=p.version,
                    commit=p.commit,
                    reason=p.reason,
                    branch=p.branch or "",
                )
                for p in history
            ],
            audited={v: store.audited_commits(who.tenant, v) for v in versions},
        )

    @app.post("/v1/tenants/{tenant}/baselines", response_model=CommandOutcome, tags=["baseline"])
    async def promote(who: Annotated[Caller, promoter], body: PromotionRequest) -> CommandOutcome:
        """Make an audited commit the baseline (`rag-eval baseline promote`); needs the `promote` scope."""
        args: list[str | File] = ["baseline", "promote", f"--tenant={who.tenant}", f"--commit={body.commit}"]
        args += [*([f"--version={body.version}"] if body.version else []), f"--min-coverage={body.min_coverage}"]
        return _finished(await _ran(runner().run(args, {}, (), {})))

    @app.get("/v1/tenants/{tenant}/reviews/{version}", response_model=CommandOutcome, tags=["review"])
    async def review_export(
        who: Annotated[Caller, reviewer],
        version: Annotated[str, Path(pattern=NAME)],
        format: Literal["jsonl", "csv"] = "jsonl",
        name: str = "",
        audit: Annotated[str | None, Query(pattern=RUN_ID)] = None,
    ) -> CommandOutcome:
        """A review sheet of a golden set, ground truths included; with `audit` (a run id), a sheet of that audit's
        judged items to label (`rag-eval review export`)."""
        sheet = f"sheet.{format}"
        args: list[str | File] = ["review", "export", f"--tenant={who.tenant}", f"--version={version}"]
        args += [*([f"--audit={audit}"] if audit else []), "--out", File(sheet)]
        return _finished(await _ran(runner().run(args, {}, (sheet,), {sheet: name or sheet})))

    @app.post("/v1/tenants/{tenant}/reviews", response_model=CommandOutcome, tags=["review"])
    async def review_import(who: Annotated[Caller, reviewer], body: ReviewImportRequest) -> CommandOutcome:
        """Apply a filled-in review sheet as a new dataset version, or store an audit sheet's labels
        (`rag-eval review import`: it tells the sheets apart)."""
        sheet = "sheet.csv" if body.sheet_name.lower().endswith(".csv") else "sheet.jsonl"
        args: list[str | File] = ["review", "import", f"--tenant={who.tenant}", "--file", File(sheet)]
        args += [f"--version={body.version}"] if body.version is not None else []
        args += [f"--new-version={body.new_version}"] if body.new_version is not None else []
        return _finished(await _ran(runner().run(args, {sheet: body.sheet}, (), {sheet: body.sheet_name})))

    @app.exception_handler(HTTPException)
    async def one_line(request: Request, error: HTTPException) -> JSONResponse:
        return _one_line(error)

    @app.exception_handler(RequestValidationError)
    async def one_line_invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return JSONResponse({"detail": f"{where}: {first.get('msg', 'invalid request')}"}, status_code=422)

    return app


def _where(request: Request) -> str:
    return f"{request.method} {request.url.path}"


def _identify(verifier: TokenVerifier, request: Request, tenant: str) -> Caller:
    """The caller a request's bearer token names, when it names the path's tenant; else refused (401/403)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        _refuse(401, "no bearer token", _where(request))
    try:
        who = verifier.verify(token.strip())
    except TokenRejected as rejected:
        _refuse(rejected.status, rejected.reason, _where(request))
    if who.tenant != tenant:
        _refuse(403, f"the token is for tenant {who.tenant!r}, not {tenant!r}", _where(request), who)
    return who


def _require_small_body(request: Request) -> None:
    if request.method not in ("POST", "PUT", "PATCH"):
        return
    length = request.headers.get("content-length", "")
    if not length.isdigit():
        raise HTTPException(411, "a request body must state its length (Content-Length)")
    if int(length) > MAX_BODY_BYTES:
        raise HTTPException(413, f"the request body is {int(length):,} bytes; at most {MAX_BODY_BYTES:,} are accepted")


def _one_line(error: HTTPException) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status_code == 401 else None
    return JSONResponse({"detail": str(error.detail)}, status_code=error.status_code, headers=headers)


def _refuse(status: int, reason: str, where: str, who: Caller | None = None) -> NoReturn:
    subject = f" tenant={who.tenant} subject={who.subject}" if who else ""
    audit.warning("refused %d %s%s: %s", status, where, subject, reason)
    raise HTTPException(status, reason)


def _answered(read):
    """A read whose bad input (no published set, an unknown version) is the caller's 404, in one line."""
    try:
        return read()
    except (ValueError, OSError) as error:
        raise HTTPException(404, str(error).splitlines()[0]) from None


def _gate_options(body: GateRequest, main_branch: str) -> list[str | File]:
    """The gate's options; a caller's value always joined to its option (`--x=value`), so a value that
    looks like an option (`--tenant=...`) stays a value."""
    options: list[str | File] = [f"--tolerance={body.tolerance}", f"--min-coverage={body.min_coverage}"]
    options += [f"--branch={body.branch}", f"--main-branch={main_branch}", f"--decide-on={body.decide_on}"]
    options += [f"--version={body.version}"] if body.version else []
    options += [f"--baseline={body.baseline}"] if body.baseline else []
    options += ["--junit", File("junit.xml")] if body.junit else []
    return options + ([] if body.rescore_baseline else ["--no-rescore-baseline"])


async def _ran(command) -> CommandResult:
    """A command's result; the service's own failure to run it is the caller's one-line 503, not a 500."""
    try:
        return await command
    except OSError as error:
        raise HTTPException(503, f"the service could not run the command: {error.strerror or error}") from None


async def _waited(job: Job, wait_s: float) -> CommandOutcome:
    try:
        await asyncio.wait_for(asyncio.shield(job.done.wait()), timeout=min(wait_s, MAX_WAIT_S))
    except TimeoutError:
        pass
    if job.state != FINISHED or job.result is None:
        return CommandOutcome(state=job.state, id=job.id)
    return _finished(job.result, job.id)


def _finished(result: CommandResult, job_id: str = "") -> CommandOutcome:
    return CommandOutcome(
        state=FINISHED,
        id=job_id,
        exit_code=result.exit_code,
        stdout=result.stdout,
        stderr=result.stderr,
        files=result.files,
    )


def log_audit_to_stderr() -> None:
    """The audit lines on the service's stderr, one per request."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s audit %(message)s"))
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    audit.propagate = False
