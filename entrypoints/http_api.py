"""The HTTP API over a JobRunner (Starlette): the video API under /v1 (`video_api` has its wire
format), the browser page at /, and probes."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from wanjax.application.job_queue import QueueFull
from wanjax.application.job_runner import JobRunner
from wanjax.domain.errors import ConfigError, InvalidRequestError, StoreError
from wanjax.domain.jobs import Job, JobStatus
from wanjax.domain.numbers import MAX_NUMBER_CHARACTERS, parse_whole, shown
from wanjax.entrypoints.video_api import read_submission, video_object

RETRY_AFTER_SECONDS = 5
KEEP_ALIVE_SECONDS = 4 * RETRY_AFTER_SECONDS
"""How long an idle connection stays open: well past Retry-After, so that a client retrying after a
429 reuses its connection instead of racing the server closing it (uvicorn's default, 5 s, equal
to Retry-After, reset 3 of the 117 retries of a 16-client load run)."""
PAGE = Path(__file__).parent / "page"
PAGE_FILES = {"/": ("index.html", "text/html"), "/page.js": ("page.js", "text/javascript"),
              "/page.css": ("page.css", "text/css")}  # fmt: skip
PUBLIC_PATHS = ("/healthz", "/readyz", *PAGE_FILES)
"""What answers without the token: the probes, and the page (which asks for the token itself)."""
LIST_LIMIT = 100
CONTENT_TYPES = {"video": "video/mp4", "thumbnail": "image/webp", "partial": "video/mp4"}
"""The `content` variants: the video, its thumbnail, and (wanjax's own) the video so far while it runs."""
UNPOLLED_MS = 1000
"""The poll interval asked for before any step has been timed."""
MAX_BODY_MB = 64
"""The largest request body read (--max-body-mb): a submission with its media files."""
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
BODY_TYPES = ("application/json", "multipart/form-data")


def build_app(runner: JobRunner, *, token: str | None = None, max_body_mb: float = MAX_BODY_MB,
              host_names: Collection[str] = LOOPBACK_NAMES) -> Starlette:  # fmt: skip
    """The app; with `token`, every route but the probes and the page asks for
    `Authorization: Bearer TOKEN`; without, a request is answered only when its Host is one of
    `host_names` (or the address it reached) and it comes from no other site's page (`_SameSite`).
    A body over `max_body_mb` MiB is refused with 413 (`_BodyLimit`)."""
    started = int(time.time())

    def video(job: Job, status_code: int = 200) -> Response:
        step = runner.step_seconds
        poll = UNPOLLED_MS if step is None else max(50, round(1000 * step))
        return JSONResponse(video_object(job, model=runner.model, fps=runner.fps), status_code=status_code,
                            headers={"openai-poll-after-ms": str(poll)})  # fmt: skip

    async def create(request: Request) -> Response:
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind not in BODY_TYPES:
            return _error(415, f"Content-Type {kind or 'none'!r}: send the request as {' or '.join(BODY_TYPES)}")
        try:
            runner.check_accepting()  # before the body is read
            fields, media = await read_submission(request)
            job = await asyncio.to_thread(runner.submit, fields, media)
        except (InvalidRequestError, ConfigError) as err:
            return _error(422, str(err))
        except QueueFull as err:
            return _error(429, f"{err}; retry later", headers={"Retry-After": str(RETRY_AFTER_SECONDS)}, kind="rate_limit_error")
        response = video(job, status_code=202)
        response.headers["Location"] = f"/v1/videos/{job.id}"
        return response

    async def listed(request: Request) -> Response:
        query = request.query_params
        order, after = query.get("order", "desc"), query.get("after")
        limit = _whole_or_none(query.get("limit", "20"))
        if limit is None or not 1 <= limit <= LIST_LIMIT:
            return _error(422, f"limit={shown(query.get('limit'))}: give a whole number from 1 to {LIST_LIMIT}")
        if order not in ("asc", "desc"):
            return _error(422, f"order={shown(order)}: give asc (oldest first) or desc (newest first)")
        jobs = runner.page(after=after, limit=limit + 1, newest_first=order == "desc")
        if jobs is None:
            return _error(422, f"after={shown(after)}: no such video; give the id of a listed one (last_id)")
        data = [video_object(job, model=runner.model, fps=runner.fps) for job in jobs[:limit]]
        return JSONResponse({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None, "has_more": len(jobs) > limit})  # fmt: skip

    async def retrieve(request: Request) -> Response:
        job = runner.get(request.path_params["video_id"])
        return _not_found(request) if job is None else video(job)

    async def content(request: Request) -> Response:
        job = runner.get(request.path_params["video_id"])
        variant = request.query_params.get("variant", "video")
        if job is None:
            return _not_found(request)
        if variant not in CONTENT_TYPES:
            return _error(422, f"variant={shown(variant)}: wanjax makes {', '.join(CONTENT_TYPES)}")
        if variant == "partial" and job.status is not JobStatus.SUCCEEDED:
            return await _partial(job)
        if job.status is not JobStatus.SUCCEEDED:
            return _error(409, f"video {job.id} is {video_object(job, model=runner.model, fps=runner.fps)['status']}; "
                               "its content exists once it has completed")  # fmt: skip
        path = runner.files.thumbnail(job.id) if variant == "thumbnail" else runner.files.video(job.id)
        if not path.is_file():
            return _error(410, f"video {job.id} completed, but its file {path.relative_to(runner.files.root)} is gone from "
                               "the server's output folder; make the video again")  # fmt: skip
        return FileResponse(path, media_type=CONTENT_TYPES[variant])

    async def _partial(job: Job) -> Response:
        """The frames of a running job's video written so far, as a playable mp4 (read off the loop)."""
        data = await asyncio.to_thread(runner.files.partial, job.id) if job.status is JobStatus.RUNNING else None
        if data is None:
            status = video_object(job, model=runner.model, fps=runner.fps)["status"]
            return _error(409, f"video {job.id} is {status} and none of its frames are written yet on this server; "
                               "ask again once its first segment is decoded (steps_done, segments_done)")  # fmt: skip
        return Response(data, media_type=CONTENT_TYPES["partial"])

    async def delete(request: Request) -> Response:
        job = runner.delete(request.path_params["video_id"])
        if job is None:
            return _not_found(request)
        return JSONResponse({"id": job.id, "object": "video.deleted", "deleted": True})

    def model_object() -> dict[str, Any]:
        return {"id": runner.model, "object": "model", "created": started, "owned_by": "wanjax", "defaults": runner.defaults,
                "cache_policies": runner.cache_policies}  # fmt: skip

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_object()]})

    async def model(request: Request) -> Response:
        if request.path_params["model_id"] != runner.model:
            return _error(404, f"no model {request.path_params['model_id']!r}; this server serves {runner.model!r}")
        return JSONResponse(model_object())

    async def loras(_: Request) -> Response:
        listing = [] if runner.loras is None else runner.loras.listing()
        return JSONResponse({"object": "list", "data": [{"id": f["name"], "object": "lora", **f} for f in listing]})

    async def page(request: Request) -> Response:
        name, media_type = PAGE_FILES[request.url.path]
        return FileResponse(PAGE / name, media_type=media_type)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_: Request) -> Response:
        if runner.store_error is not None:
            return PlainTextResponse(f"the job store cannot be written: {runner.store_error}\n", status_code=503)
        if runner.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse("loading the model\n", status_code=503)

    async def store_unavailable(_: Request, err: Exception) -> Response:
        return _error(503, f"{err}; retry later", headers={"Retry-After": str(RETRY_AFTER_SECONDS)}, kind="server_error")

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(runner.metrics.text(), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[
            Route("/v1/videos", create, methods=["POST"]),
            Route("/v1/videos", listed, methods=["GET"]),
            Route("/v1/videos/{video_id}", retrieve, methods=["GET"]),
            Route("/v1/videos/{video_id}", delete, methods=["DELETE"]),
            Route("/v1/videos/{video_id}/content", content, methods=["GET"]),
            Route("/v1/models", models),
            Route("/v1/models/{model_id:path}", model),
            Route("/v1/loras", loras),
            *(Route(path, page) for path in PAGE_FILES),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
        ],
        exception_handlers={StoreError: store_unavailable},
    )
    app.add_middleware(_BodyLimit, limit=int(max_body_mb * 2**20))
    if token is not None:
        app.add_middleware(_BearerToken, token=token)
    else:
        app.add_middleware(_SameSite, names=frozenset(name.lower() for name in host_names))
    return app


class _BearerToken:
    """401 for a request without `Authorization: Bearer <token>` (PUBLIC_PATHS excepted); the
    scheme's name in any case (RFC 7235)."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").strip().partition(b" ")
            if not (scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._expected)):
                response = _error(401, "give the server's token: Authorization: Bearer TOKEN", kind="authentication_error")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


class _SameSite:
    """For a server without a token: 403 for a request whose Host is not one of the server's names
    or the address it reached (a DNS-rebinding page's Host is its own name), and for one whose
    Origin is not the server itself (another site's page posting a form or text/plain body)."""

    def __init__(self, app: Any, names: frozenset[str]) -> None:
        self._app = app
        self._names = names

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            host = headers.get(b"host", b"").decode("latin-1").lower()
            name = urlsplit(f"//{host}").hostname or ""
            origin = headers.get(b"origin")
            allowed = self._names | {str((scope.get("server") or ("",))[0]).lower()}
            problem = None
            if name not in allowed:
                problem = f"Host {host!r} is not this server's name; open it by its address (e.g. 127.0.0.1), or start it with --token"
            elif origin is not None and urlsplit(origin.decode("latin-1")).netloc.lower() != host:
                problem = f"a page of {origin.decode('latin-1')!r} may not use this server; start it with --token to let other sites' pages in"
            if problem is not None:
                await _error(403, problem, kind="permission_error")(scope, receive, send)
                return
        await self._app(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


class _BodyLimit:
    """413 for a request body over `limit` bytes: at once when its Content-Length says so, else as
    soon as that many bytes have arrived (nothing more is read)."""

    def __init__(self, app: Any, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or len(declared) > MAX_NUMBER_CHARACTERS or int(declared) > self._limit:
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Any:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self._limit:
                raise _BodyTooLarge
            return message

        async def sending(message: Any) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._app(scope, counted, sending)
        except _BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Any, receive: Any, send: Any) -> None:
        megabytes = self._limit / 2**20
        await _error(413, f"the request body is over {megabytes:g} MiB; send smaller media (the server's --max-body-mb)")(scope, receive, send)


def _whole_or_none(text: str) -> int | None:
    try:
        return parse_whole(text)
    except ValueError:
        return None


def _not_found(request: Request) -> Response:
    return _error(404, f"no video {request.path_params['video_id']}: never accepted by this server, or deleted")


def _error(status_code: int, message: str, headers: dict[str, str] | None = None, *,
           kind: str = "invalid_request_error") -> Response:  # fmt: skip
    """The error as the OpenAI API shapes it (the SDK reads `error.message`)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status_code, headers=headers)
