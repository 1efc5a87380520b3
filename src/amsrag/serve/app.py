"""The HTTP API (FastAPI): DESIGN §9's retrieve/ask JSON over HTTP, documents, the query library, jobs,
health, metrics, an OpenAI-compatible chat endpoint and the web UI. Build it with `create_app(service)`."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from amsrag.access.errors import ApiError, error_body
from amsrag.access.limits import BodyLimit, HostCheck, KeyCheck, allowed_host_names, is_loopback
from amsrag.errors import AmsragError, IndexBusyError, IndexCorruptError
from amsrag.filters import Where
from amsrag.pipeline.results import QuestionError, check_question
from amsrag.serve.errors import COMMON_ERRORS, REVIEW_ERRORS
from amsrag.serve.limits import Admission
from amsrag.serve.service import Service
from amsrag.serve.sources import media_type, safe_headers
from amsrag.version import __version__

log = logging.getLogger("amsrag.serve")
STATIC = resources.files("amsrag.serve") / "static"
REFRESH_S = 2.0  # how often the index directory is checked for writes by other processes
SQL_INT_MAX = 2**63 - 1  # SQLite's and PostgreSQL's integers: a larger id or offset is refused, not an overflow
ReviewId = Annotated[int, PathParam(ge=0, le=SQL_INT_MAX, description="a review item's id")]


# ---------------------------------------------------------------------------- request bodies
WHERE_HELP = ("only passages this metadata filter allows: {\"source\": [globs], \"type\": [pdf|html|docx|pptx|"
              "markdown|text], \"doc\": [globs of document keys], \"tag\": [tags], \"modified\": {\"gte\"|\"gt\"|"
              "\"lte\"|\"lt\": \"YYYY-MM-DD[THH:MM:SS[Z]]\"}}; fields AND, values OR (400 when malformed)")

class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrieveBody(_Body):
    query: str | None = Field(None, description="the question (alias: `question`)")
    question: str | None = None
    system: str = Field("full", description="full|fixed|A0..A4|bm25|dense|graph|adaptive-rag")
    k: int | None = Field(None, ge=1, description="passages to return (default: the strategy's k)")
    explain: bool = Field(False, description="add `titles`: the title of every passage the trace names")
    where: dict[str, Any] | None = Field(None, description=WHERE_HELP)


class AskBody(_Body):
    query: str | None = Field(None, description="the question (alias: `question`)")
    question: str | None = None
    system: str = Field("full", description="full|fixed|A0..A4|bm25|dense|graph|adaptive-rag")
    explain: bool = Field(False, description="add `titles`: the title of every passage the trace names")
    where: dict[str, Any] | None = Field(None, description=WHERE_HELP)


class DocumentsBody(_Body):
    passages: list[Any] = Field(description="passage objects {id?, title?, text, doc_id?, metadata?}")
    background: bool | None = Field(
        None, description="run as a background job (default: when the batch exceeds the job threshold)")


class DocumentBody(_Body):
    text: str | None = Field(None, description="the document's text, chunked as `amsrag index add` chunks a file")
    format: Literal["text", "markdown"] = Field("text", description="how `text` is split: text or markdown")
    title: str = Field("", description="fallback passage title (Markdown takes its first heading)")
    passages: list[Any] | None = Field(
        None, description="or the document's passages {id?, title?, text, metadata?} (ids default to DOC_ID#n)")
    metadata: dict[str, Any] | None = Field(None, description="metadata of every chunk of `text`")


class LibraryQuery(_Body):
    question: str = Field(description="the question as users ask it")
    hop: str = Field(description="its hop structure: one_hop or multi_hop")


class ReviewBody(_Body):
    verdict: str = Field(description="the answer is right or wrong")
    true_class: str | None = Field(None, description="the question's true class: zero_hop (no retrieval), "
                                   "one_hop or multi_hop")
    note: str = Field("", description="the reviewer's note")


class DismissBody(_Body):
    note: str = Field("", description="why it was dismissed")


class LibraryBody(_Body):
    queries: list[LibraryQuery] = Field(description="labelled queries {question, hop}")
    source: str = Field("api", description="where the labels came from (kept with each query)")


def question_of(body: RetrieveBody | AskBody, limit: int) -> str:
    if body.query is not None and body.question is not None:
        raise ApiError(422, "invalid_request", "give `query` or `question`, not both")
    q = body.query if body.query is not None else body.question
    if q is None:
        raise ApiError(422, "invalid_request", "a non-empty `query` (or `question`) is required")
    check_question(q, limit)  # a QuestionError: 422 with the engine's and the CLI's message
    return q


# ---------------------------------------------------------------------------- middleware
class RequestMetrics:
    """Counts and times every request by its route template (not the raw path: ids would explode labels)."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.metrics = service.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or ("/static" if scope["path"].startswith("/static/") else "other")
            self.metrics.requests.labels(scope["method"], name, str(status)).inc()
            self.metrics.latency.labels(name).observe(time.perf_counter() - t)


# ---------------------------------------------------------------------------- the app
def create_app(service: Service, warm: bool = True) -> FastAPI:
    cfg = service.config
    # Two lanes with the same limits: retrieval (tens of ms) never queues behind answers (a generator
    # can take seconds), so a burst of /v1/ask cannot starve /v1/retrieve.
    lanes = {lane: Admission(cfg.max_running, cfg.max_queued, cfg.request_timeout_s, service.metrics.admission(lane))
             for lane in ("retrieve", "answer")}
    keys = KeyCheck(cfg.api_keys)
    if service.shadow is not None:  # a shadow probe starts only while no request is in flight
        service.shadow.busy = lambda: any(lane.admitted for lane in lanes.values())

    async def watch_index() -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                await asyncio.wrap_future(service.writer.submit(service.refresh_if_changed))
            except Exception:
                log.exception("checking the index for outside writes failed")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if warm:
            ms = await asyncio.to_thread(service.warm)
            log.info("warmed up in %s ms", ms)
        watcher = asyncio.create_task(watch_index())
        yield
        watcher.cancel()
        for lane in lanes.values():
            lane.close()

    # With keys, the API description and its pages need one too (added below, behind `auth`).
    docs_urls: dict[str, Any] = {"docs_url": None, "redoc_url": None, "openapi_url": None} if keys.enabled else {}
    app = FastAPI(title="amsrag", version=__version__, lifespan=lifespan, responses=COMMON_ERRORS, **docs_urls,
                  description="Adaptive multi-source RAG: retrieval and answers with the route taken (DESIGN §9).")
    app.state.service = service
    app.state.lanes = lanes

    async def authorised(request: Request) -> None:
        keys.check(request.headers.get("authorization"), request.headers.get("x-api-key"))

    auth = [Depends(authorised)]

    async def reviewer(request: Request) -> None:
        """Reviews write labelled data: off loopback they need an API key, even where other reads might not."""
        if not keys.enabled and not is_loopback(cfg.host):
            raise ApiError(403, "review_needs_key", f"reviews need an API key when the server listens on "
                           f"{cfg.host}: set AMSRAG_API_KEYS=key1,key2 (or [serve] api_keys), or bind to 127.0.0.1")
        await authorised(request)

    review_auth = [Depends(reviewer)]

    # errors: one JSON shape with a stable code
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(service, exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
        return _error(service, 422, "invalid_request", problems or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(service, exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(AmsragError)
    async def _amsrag(request: Request, exc: AmsragError) -> JSONResponse:
        if isinstance(exc, QuestionError):  # too long or empty: refused before any work, wherever it was caught
            return _error(service, 422, exc.code, str(exc))
        if isinstance(exc, IndexCorruptError):
            return _error(service, 500, "index_error", str(exc))
        if isinstance(exc, IndexBusyError):
            return _error(service, 503, "index_busy", str(exc), {"Retry-After": "5"})
        return _error(service, 400, "invalid_input", str(exc))

    @app.exception_handler(UnicodeEncodeError)
    async def _not_text(request: Request, exc: UnicodeEncodeError) -> JSONResponse:
        if exc.reason != "surrogates not allowed":
            return await _internal(request, exc)
        # Text the entry checks did not see (a metadata value, a path): refused whole, nothing was stored.
        return _error(service, 422, "invalid_text", f"the request holds text that is not valid Unicode (a lone "
                      f"UTF-16 surrogate at character {exc.start} of a string); send UTF-8 text")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(service, 500, "internal_error", f"{type(exc).__name__}: the server failed; see its log")

    # ---------------------------------------------------------------- query endpoints
    @app.post("/v1/retrieve", dependencies=auth, tags=["query"],
              summary="Adaptive retrieval: passages and the trace (DESIGN §9 retrieve JSON)")
    async def retrieve(body: RetrieveBody) -> dict[str, Any]:
        q = question_of(body, cfg.max_question_chars)
        if body.k is not None and body.k > cfg.max_k:
            raise ApiError(422, "k_too_large", f"k = {body.k} exceeds the limit of {cfg.max_k}")
        where = Where.from_json(body.where)  # a malformed filter: InputError, 400 invalid_input
        return await lanes["retrieve"].call(service.retrieve, q, body.system, body.k, body.explain, where)

    @app.post("/v1/ask", dependencies=auth, tags=["query"],
              summary="An answer with citations and the trace (DESIGN §9 ask JSON, plus the cited `sources`)")
    async def ask(body: AskBody) -> dict[str, Any]:
        q = question_of(body, cfg.max_question_chars)
        where = Where.from_json(body.where)
        return await lanes["answer"].call(service.ask, q, body.system, body.explain, "api", where)

    @app.get("/v1/config", dependencies=auth, tags=["service"],
             summary="Router thresholds, systems and limits (what the web UI draws against)")
    async def config() -> dict[str, Any]:
        return service.describe()

    # ---------------------------------------------------------------- documents
    @app.post("/v1/documents", dependencies=auth, tags=["documents"], status_code=200,
              responses={202: {"description": "started as a background job: its status at `Location`"}},
              summary="Add passages; large batches run as a background job (202 + status URL)")
    async def add_documents(body: DocumentsBody) -> Response:
        passages = service.parse_passages(body.passages)
        background = body.background if body.background is not None else len(passages) > cfg.job_threshold
        if background:
            job = service.start_add_job(passages)
            return JSONResponse(job.to_dict(), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
        result = await _write(service, cfg.request_timeout_s, service.add, passages)
        return JSONResponse(result)

    @app.put("/v1/documents/{doc_id:path}", dependencies=auth, tags=["documents"],
             summary="Replace (or create) a whole document: unchanged passages stay, only new content is embedded")
    async def put_document(doc_id: str, body: DocumentBody) -> dict[str, Any]:
        document = service.parse_document(doc_id, body.text, body.format, body.title, body.passages, body.metadata)
        return await _write(service, cfg.request_timeout_s, service.put, document)

    @app.get("/v1/documents/{pid:path}", dependencies=auth, tags=["documents"], summary="One stored passage")
    async def get_document(pid: str) -> dict[str, Any]:
        doc = await asyncio.to_thread(service.document, pid)
        if doc is None:
            raise ApiError(404, "not_found", f"no passage with id {pid!r}")
        return doc

    @app.get("/v1/sources/{name}/{path:path}", dependencies=auth, tags=["documents"], response_class=FileResponse,
             responses={200: {"description": "the file's bytes, read-only, with its content type (scripts of HTML "
                                             "and other active types sandboxed)", "content": {"*/*": {}}}},
             summary="A cited source file of a served folder (`amsrag serve --sources`); citations' `url`",
             description="The file PATH of the folder served under NAME (`amsrag serve --sources [NAME=]DIR`, and "
             "every `--watch` folder), read-only: the target of a citation's `url` (`#page=N` for a PDF, `#ANCHOR` "
             "for the section of an HTML or Markdown file). Only "
             "files inside that folder that the index holds as document `NAME/PATH`; `..`, absolute paths, "
             "symlinks leading out, directories, missing files and unknown names are 404. Sent with its content "
             "type, `X-Content-Type-Options: nosniff`, and `Content-Security-Policy: sandbox` for anything but a "
             "PDF or a raster image (a served HTML page runs no script on the service's origin).")
    async def source_file(name: Annotated[str, PathParam(description="the served folder's name")],
                          path: Annotated[str, PathParam(description="the file's path inside the folder")]
                          ) -> Response:
        found = await asyncio.to_thread(service.source_file, name, path)
        if found is None:  # one answer for every refusal: nothing tells what exists outside the served files
            raise ApiError(404, "not_found", f"no source file {name}/{path} is served here (the folders served: "
                           f"`amsrag serve --sources`; only files the index holds)")
        kind = media_type(found)
        return FileResponse(found, media_type=kind, headers=safe_headers(kind))

    @app.delete("/v1/documents/{pid:path}", dependencies=auth, tags=["documents"],
                summary="Delete one passage, or with ?document=true every passage of the document PID")
    async def delete_document(pid: str, document: bool = False) -> dict[str, Any]:
        def delete() -> dict[str, Any] | None:
            if document:
                return service.delete_document(pid)
            if service.engine.index.get(pid) is None:
                return None
            return service.delete([pid])

        result = await _write(service, cfg.request_timeout_s, delete)
        if result is None:
            what = "document" if document else "passage"
            raise ApiError(404, "not_found", f"no {what} with id {pid!r}; nothing was deleted")
        return result

    # ---------------------------------------------------------------- the query library
    @app.post("/v1/route/library", dependencies=auth, tags=["routing"],
              summary="Add labelled queries to the query library (relabels win); the add report and the counts")
    async def learn_queries(body: LibraryBody) -> dict[str, Any]:
        questions, hops, source = service.parse_library_queries(
            [(q.question, q.hop) for q in body.queries], body.source)
        return await _write(service, cfg.request_timeout_s, service.learn_queries, questions, hops, source)

    @app.get("/v1/route/library", dependencies=auth, tags=["routing"],
             summary="The query library's size, by hop label and by source")
    async def library_counts() -> dict[str, Any]:
        return await asyncio.to_thread(service.library_counts)

    # ---------------------------------------------------------------- the review queue
    def review_queue() -> Any:
        if service.review_queue is None:
            raise ApiError(404, "review_off", service.review_off)
        return service.review_queue

    @app.get("/v1/review", responses=REVIEW_ERRORS, dependencies=review_auth, tags=["review"],
             summary="Items of the review queue (newest first) and the counts by status")
    async def review_list(status: str = "open", limit: int = 50,
                          offset: Annotated[int, Query(ge=0, le=SQL_INT_MAX)] = 0) -> dict[str, Any]:
        queue = review_queue()

        def read() -> dict[str, Any]:
            chosen = None if status == "all" else status
            return {"items": [i.to_dict() for i in queue.items(chosen, limit, offset)], "counts": queue.counts()}

        return await asyncio.to_thread(read)

    @app.get("/v1/review/{item_id}", responses=REVIEW_ERRORS, dependencies=review_auth, tags=["review"],
             summary="One review item")
    async def review_item(item_id: ReviewId) -> dict[str, Any]:
        item = await asyncio.to_thread(review_queue().get, item_id)
        if item is None:
            raise ApiError(404, "not_found", f"no review item {item_id}")
        return item.to_dict()

    @app.post("/v1/review/{item_id}", responses=REVIEW_ERRORS, dependencies=review_auth, tags=["review"],
              summary="Review an item: the answer right or wrong, the question's true class, a note")
    async def review_mark(item_id: ReviewId, body: ReviewBody) -> dict[str, Any]:
        queue = review_queue()
        if await asyncio.to_thread(queue.get, item_id) is None:
            raise ApiError(404, "not_found", f"no review item {item_id}")
        item = await asyncio.to_thread(queue.mark, item_id, body.verdict, body.true_class, body.note)
        return item.to_dict()

    @app.post("/v1/review/{item_id}/dismiss", responses=REVIEW_ERRORS, dependencies=review_auth, tags=["review"],
              summary="Dismiss an item: it leaves the open list without a review")
    async def review_dismiss(item_id: ReviewId, body: DismissBody | None = None) -> dict[str, Any]:
        queue = review_queue()
        if await asyncio.to_thread(queue.get, item_id) is None:
            raise ApiError(404, "not_found", f"no review item {item_id}")
        item = await asyncio.to_thread(queue.dismiss, item_id, body.note if body else "")
        return item.to_dict()

    @app.get("/v1/jobs/{job_id}", dependencies=auth, tags=["documents"], summary="Status of a background job")
    async def job_status(job_id: str) -> dict[str, Any]:
        job = await asyncio.to_thread(service.writer.get, job_id)  # a PostgreSQL store is read for other jobs
        if job is None:
            raise ApiError(404, "not_found", f"no job {job_id!r} (finished jobs are kept for a while, then dropped)")
        return job.to_dict()

    # ---------------------------------------------------------------- service
    @app.get("/healthz", tags=["service"], summary="Liveness and readiness")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "passages": len(service.engine.index),
                "uptime_s": round(time.time() - service.started, 1)}

    @app.get("/metrics", dependencies=auth, tags=["service"], summary="Prometheus metrics",
             response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    from amsrag.serve.openai_compat import add_openai_routes

    add_openai_routes(app, service, lanes["answer"], auth)

    if keys.enabled:
        _add_keyed_docs(app, auth)

    # ---------------------------------------------------------------- web UI
    @app.get("/", include_in_schema=False)
    async def index_page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @app.get("/review", include_in_schema=False)
    async def review_page() -> FileResponse:  # the same page; app.js shows its review view on this path
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:  # browsers ask for /favicon.ico; an SVG served with its own type
        return FileResponse(str(STATIC / "favicon.svg"), media_type="image/svg+xml",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    if cfg.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=cfg.cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type"])
    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes,
                       on_reject=lambda: service.metrics.errors.labels("body_too_large").inc())
    app.add_middleware(RequestMetrics, service=service)
    app.add_middleware(HostCheck, allowed=allowed_host_names(cfg.allowed_hosts, cfg.host, keys.enabled),
                       on_reject=lambda: service.metrics.errors.labels("host_not_allowed").inc())
    return app


def _add_keyed_docs(app: FastAPI, auth: list[Any]) -> None:
    """/openapi.json, /docs and /redoc behind the API key."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html

    @app.get("/openapi.json", dependencies=auth, include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", dependencies=auth, include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="amsrag API")

    @app.get("/redoc", dependencies=auth, include_in_schema=False)
    async def redoc() -> Response:
        return get_redoc_html(openapi_url="/openapi.json", title="amsrag API")


async def _write(service: Service, timeout_s: float, fn, *args: Any) -> Any:
    future = asyncio.wrap_future(service.writer.submit(lambda: fn(*args)))
    try:
        return await asyncio.wait_for(asyncio.shield(future), timeout=timeout_s)
    except TimeoutError:
        raise ApiError(504, "timeout", f"the write did not finish within {timeout_s:g} s; it continues in the "
                                       f"background: check GET /v1/documents/ID, or send large batches as a "
                                       f"job (`background: true`)") from None


def _error(service: Service, status: int, code: str, message: str,
           headers: dict[str, str] | None = None) -> JSONResponse:
    service.metrics.errors.labels(code).inc()
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)
