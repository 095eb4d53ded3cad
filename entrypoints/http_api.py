"""The HTTP API over a JobRunner (Starlette): jobs as resources under /v1/videos, and probes."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from wanjax.application.job_queue import QueueFull
from wanjax.application.job_runner import JobRunner
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.jobs import JobStatus

RETRY_AFTER_SECONDS = 5
KEEP_ALIVE_SECONDS = 4 * RETRY_AFTER_SECONDS
"""How long an idle connection stays open: well past Retry-After, so that a client retrying after a
429 reuses its connection instead of racing the server closing it (uvicorn's default, 5 s, equal
to Retry-After, reset 3 of the 117 retries of a 16-client load run)."""
PUBLIC_PATHS = ("/healthz", "/readyz")
NOT_JSON = "the body is not JSON: send a JSON object of request fields (or multipart: request=JSON, image=FILE)"


def build_app(runner: JobRunner, *, token: str | None = None) -> Starlette:
    """The app; with `token`, every route but the probes asks for `Authorization: Bearer TOKEN`."""

    async def submit(request: Request) -> Response:
        try:
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                body = await _multipart_body(request)
            else:
                body = await request.json()
        except ValueError as err:
            return _error(422, str(err) if isinstance(err, InvalidRequestError) else NOT_JSON)
        try:
            job = await asyncio.to_thread(runner.submit, body)
        except (InvalidRequestError, ConfigError) as err:
            return _error(422, str(err))
        except QueueFull as err:
            return _error(429, f"{err}; retry later", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return JSONResponse(job.as_json(), status_code=202, headers={"Location": f"/v1/videos/{job.id}"})

    async def status(request: Request) -> Response:
        job = runner.get(request.path_params["job_id"])
        return _not_found(request) if job is None else JSONResponse(job.as_json())

    async def content(request: Request) -> Response:
        job = runner.get(request.path_params["job_id"])
        if job is None:
            return _not_found(request)
        if job.status is not JobStatus.SUCCEEDED:
            return _error(409, f"job {job.id} is {job.status.value}; its video exists once it has succeeded")
        return FileResponse(job.output, media_type="video/mp4")

    async def cancel(request: Request) -> Response:
        job = runner.cancel(request.path_params["job_id"])
        if job is None:
            return _not_found(request)
        if job.status.finished and job.status is not JobStatus.CANCELLED:
            return _error(409, f"job {job.id} has already {job.status.value}; nothing to cancel")
        return JSONResponse(job.as_json(), status_code=202 if job.status is JobStatus.RUNNING else 200)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_: Request) -> Response:
        if runner.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse("loading the model\n", status_code=503)

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(runner.metrics.text(), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[
            Route("/v1/videos", submit, methods=["POST"]),
            Route("/v1/videos/{job_id}", status, methods=["GET"]),
            Route("/v1/videos/{job_id}", cancel, methods=["DELETE"]),
            Route("/v1/videos/{job_id}/content", content, methods=["GET"]),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
        ]
    )
    if token is not None:
        app.add_middleware(_BearerToken, token=token)
    return app


class _BearerToken:
    """401 for a request without `Authorization: Bearer <token>` (the probes excepted)."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = _error(401, "give the server's token: Authorization: Bearer TOKEN")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


async def _multipart_body(request: Request) -> dict[str, Any]:
    """A multipart/form-data submission: the part `request` holds the request fields as a JSON
    object, the file part `image` the first frame (png/jpg). The image joins the fields as base64,
    so the job's record holds everything needed to run it again after a restart."""
    async with request.form(max_files=1, max_fields=1) as form:
        unknown = sorted(set(form.keys()) - {"request", "image"})
        if unknown:
            raise InvalidRequestError(f"{', '.join(unknown)}: unknown form part; send `request` (JSON) and `image` (file)")
        fields, image = form.get("request"), form.get("image")
        if not isinstance(fields, str):
            raise InvalidRequestError("request: give the request fields as a JSON object in the form part `request`")
        body = json.loads(fields)  # a ValueError: not JSON
        if not isinstance(body, dict):
            raise InvalidRequestError("request: the form part `request` must be a JSON object of request fields")
        if image is None:
            return body
        if isinstance(image, str) or "image" in body:
            raise InvalidRequestError("image: send the first frame once, as the file part `image` (png/jpg)")
        body["image"] = base64.b64encode(await image.read()).decode()
    return body


def _not_found(request: Request) -> Response:
    return _error(404, f"no job {request.path_params['job_id']} was ever accepted by this server")


def _error(status_code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status_code, headers=headers)
