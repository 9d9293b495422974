"""The gate service: the only door for tenants (`rag-eval serve`; OpenAPI at /docs and /openapi.json).

Every route is under /v1/tenants/{tenant}/ and needs a bearer token whose verified claims name that
tenant and grant the route's scope; the tenant every store, query and child command uses is the
token's, never a value the caller sent. A refusal (401 no or bad token, 403 another tenant or a
missing scope) reads and writes nothing and leaves one line in the audit log, as every allowed request
does. Reads answer from the stores in this process; gates, promotions and reviews run as `rag-eval`
commands in child processes (commands.py), so they print and exit exactly as on the operator's machine.
"""

import asyncio
import contextlib
import functools
import logging
import sys
from typing import Annotated, Literal, NoReturn

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from rag_eval_pipeline.core.defaults import DEFAULT_MIN_COVERAGE, DEFAULT_TOLERANCE
from rag_eval_pipeline.service.commands import FINISHED, CommandResult, CommandRunner, Job
from rag_eval_pipeline.service.tokens import GATE, PROMOTE, READ, REVIEW, Caller, TokenRejected, TokenVerifier
from rag_eval_pipeline.settings import Settings

AUDIT_LOGGER = "rag_eval_pipeline.service.audit"
MAX_WAIT_S = 300.0  # the longest one request holds a connection waiting for a verdict; the caller polls again
NAME = r"^[a-z0-9_-]{1,63}$"  # a tenant or version name, as core.names accepts it

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


class GateRequest(BaseModel):
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


class PromotionRequest(BaseModel):
    commit: str
    version: str | None = None
    min_coverage: float = DEFAULT_MIN_COVERAGE


class ReviewImportRequest(BaseModel):
    version: str
    new_version: str
    sheet: str = Field(description="the filled-in review sheet's text")
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
            runner_holder["runner"] = CommandRunner(settings.service.max_gates, settings.service.warm_children)
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

    def caller(scope: str):
        def check(
            request: Request,
            tenant: Annotated[str, Path()],
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        ) -> Caller:
            where = f"{request.method} {request.url.path}"
            if credentials is None:
                _refuse(401, "no bearer token", where)
            try:
                who = verifier.verify(credentials.credentials)
            except TokenRejected as rejected:
                _refuse(rejected.status, rejected.reason, where)
            if who.tenant != tenant:
                _refuse(403, f"the token is for tenant {who.tenant!r}, not {tenant!r}", where, who)
            try:
                who.require(scope)
            except TokenRejected as rejected:
                _refuse(rejected.status, rejected.reason, where, who)
            audit.info("allowed %s tenant=%s subject=%s scope=%s", where, who.tenant, who.subject, scope)
            return who

        return check

    reader, gater, promoter, reviewer = (Depends(caller(s)) for s in (READ, GATE, PROMOTE, REVIEW))
    version_query = Query(default=None, pattern=NAME, description="default: the tenant's latest published version")

    @app.get("/v1/tenants/{tenant}/questions", response_model=Questions, tags=["golden set"])
    def questions(who: Annotated[Caller, reader], version: str | None = version_query) -> Questions:
        """The published golden set's questions, for a CI job to answer (no ground truths: those need `review`)."""
        from rag_eval_pipeline.cli.questions import published_questions

        chosen, frame = _answered(lambda: published_questions(stores().results, who.tenant, version))
        items = [Question(qa_id=str(q), question=str(t)) for q, t in zip(frame["qa_id"], frame["question"])]
        return Questions(tenant=who.tenant, version=chosen, items=items)

    @app.post("/v1/tenants/{tenant}/gates", response_model=CommandOutcome, status_code=202, tags=["gate"])
    async def start_gate(
        who: Annotated[Caller, gater], body: GateRequest, wait: Annotated[float, Query(ge=0)] = 0.0
    ) -> CommandOutcome:
        """Audit a commit's outputs against the baseline (`rag-eval gate`); wait up to `wait` s for the verdict."""
        args = ["gate", "--tenant", who.tenant, "--candidate", body.commit, *_gate_options(body)]
        inputs = {"outputs.jsonl": body.outputs_jsonl} if body.outputs_jsonl is not None else {}
        if inputs:
            args += ["--outputs", "{outputs.jsonl}"]
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
        args = ["baseline", "promote", "--tenant", who.tenant, "--commit", body.commit]
        args += [*(["--version", body.version] if body.version else []), "--min-coverage", str(body.min_coverage)]
        return _finished(await runner().run(args, {}, (), {}))

    @app.get("/v1/tenants/{tenant}/reviews/{version}", response_model=CommandOutcome, tags=["review"])
    async def review_export(
        who: Annotated[Caller, reviewer],
        version: Annotated[str, Path(pattern=NAME)],
        format: Literal["jsonl", "csv"] = "jsonl",
        name: str = "",
    ) -> CommandOutcome:
        """A review sheet of a golden set, ground truths included (`rag-eval review export`)."""
        sheet = f"sheet.{format}"
        args = ["review", "export", "--tenant", who.tenant, "--version", version, "--out", f"{{{sheet}}}"]
        return _finished(await runner().run(args, {}, (sheet,), {sheet: name or sheet}))

    @app.post("/v1/tenants/{tenant}/reviews", response_model=CommandOutcome, tags=["review"])
    async def review_import(who: Annotated[Caller, reviewer], body: ReviewImportRequest) -> CommandOutcome:
        """Apply a filled-in review sheet as a new dataset version (`rag-eval review import`)."""
        sheet = "sheet.csv" if body.sheet_name.lower().endswith(".csv") else "sheet.jsonl"
        args = ["review", "import", "--tenant", who.tenant, "--version", body.version]
        args += ["--file", f"{{{sheet}}}", "--new-version", body.new_version]
        return _finished(await runner().run(args, {sheet: body.sheet}, (), {sheet: body.sheet_name}))

    @app.exception_handler(HTTPException)
    async def one_line(request: Request, error: HTTPException) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if error.status_code == 401 else None
        return JSONResponse({"detail": str(error.detail)}, status_code=error.status_code, headers=headers)

    return app


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


def _gate_options(body: GateRequest) -> list[str]:
    options = ["--tolerance", str(body.tolerance), "--min-coverage", str(body.min_coverage)]
    options += ["--branch", body.branch, "--main-branch", body.main_branch]
    options += ["--version", body.version] if body.version else []
    options += ["--baseline", body.baseline] if body.baseline else []
    options += ["--junit", "{junit.xml}"] if body.junit else []
    return options + ([] if body.rescore_baseline else ["--no-rescore-baseline"])


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
