"""The video API's wire format, the one the `openai` SDK's `client.videos` speaks: a submission
read from multipart/form-data (as the SDK sends it) or a JSON object, and a job written as a
video object. docs/serving.md has the mapping of fields and statuses."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request

from wanjax.application.job_requests import MEDIA_FIELDS
from wanjax.domain.caching.settings import policy_keys
from wanjax.domain.config import CACHE_KEYS, ROUTES
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.jobs import Job, JobStatus
from wanjax.domain.numbers import json_integer, shown
from wanjax.domain.requests import GenerationRequest

TEXT_FIELDS = frozenset(
    {"prompt", "model", "size", "seconds"}
    | {f.name for f in attrs.fields(GenerationRequest) if f.type == "str"}
    | {key for key in CACHE_KEYS if isinstance(ROUTES[key][1].default, str)}  # cache_policy, cache_model
)
"""Fields whose multipart value is taken as text; every other field's is read as JSON (`7`, `4.5`)."""
STATUSES = {
    JobStatus.QUEUED: "queued",
    JobStatus.RUNNING: "in_progress",
    JobStatus.SUCCEEDED: "completed",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "failed",  # with the error code "cancelled"
}
FILE_FIELDS = ", ".join(MEDIA_FIELDS)


async def read_submission(request: Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The client's fields (JSON values) and files (bytes, by field) of a POST /v1/videos;
    InvalidRequestError naming the field for a body that is neither form nor JSON object."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        return await _form_submission(request)
    try:
        body = read_json(await request.body())
    except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
        raise InvalidRequestError("the body is neither multipart/form-data nor a JSON object of request fields "
                                  "(nested at most a few hundred levels)") from None  # fmt: skip
    if not isinstance(body, dict):
        raise InvalidRequestError(f"the body must be a JSON object of request fields, not a {type(body).__name__}")
    media = {name: _base64(body.pop(name), name) for name in MEDIA_FIELDS if body.get(name) is not None}
    return body, media


async def _form_submission(request: Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    try:
        form = await request.form(max_files=len(MEDIA_FIELDS), max_fields=100)
    except HTTPException as err:  # Starlette's refusal of a form past its limits
        raise InvalidRequestError(f"the form: {err.detail} (a text field holds at most 1 MiB, a form "
                                  f"{len(MEDIA_FIELDS)} files and 100 fields)") from None  # fmt: skip
    try:
        return await _form_fields(form)
    finally:
        await form.close()


async def _form_fields(form: FormData) -> tuple[dict[str, Any], dict[str, bytes]]:
    fields: dict[str, Any] = {}
    media: dict[str, bytes] = {}
    for key, value in form.multi_items():
        name = key.removesuffix("[]")
        if name.partition("[")[0] in MEDIA_FIELDS:
            if not isinstance(value, UploadFile) or name != key:
                raise InvalidRequestError(f"{key}: upload the file itself (a reference by URL or file id is not fetched)")
            media[name] = await value.read()
        elif isinstance(value, UploadFile):
            raise InvalidRequestError(f"{key}: not a file field; the files are {FILE_FIELDS}")
        elif name != key:  # the SDK's form of a list: `name[]` once per item
            fields.setdefault(name, []).append(_form_value(name, value))
        elif name in fields:
            raise InvalidRequestError(f"{name}: given twice; give it once")
        else:
            fields[name] = _form_value(name, value)
    return fields, media


def _form_value(name: str, text: str) -> Any:
    if name in TEXT_FIELDS:
        return text
    try:
        return read_json(text)
    except (ValueError, RecursionError):
        raise InvalidRequestError(f"{name}={shown(text)}: not a number (or JSON value)") from None


def read_json(text: str | bytes) -> Any:
    """A client's JSON: an integer of more digits than any field takes read as the float it rounds to
    (`numbers.json_integer`), so that the field refuses it by name."""
    return json.loads(text, parse_int=json_integer)


def _base64(value: Any, name: str) -> bytes:
    """A JSON body's file: base64, or a data URL (`data:image/png;base64,...`)."""
    if isinstance(value, str) and value.startswith("data:"):
        value = value.partition(",")[2]
    try:
        if not isinstance(value, str):
            raise ValueError
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(f"{name}: give the file's bytes as base64 (or a base64 data URL), or send multipart/form-data") from None


def video_object(job: Job, *, model: str, fps: int) -> dict[str, Any]:
    """The job as the SDK's `Video`, wanjax's own settings and timings beside its fields."""
    request = job.request
    frames = request.get("output_frames", request["num_frames"])  # a record of before output_frames: the same
    finished = job.finished_at is not None and job.status.finished
    return {
        "id": job.id,
        "object": "video",
        "model": model,
        "status": STATUSES[job.status],
        "progress": _percent(job),
        "created_at": int(job.created_at),
        "completed_at": int(job.finished_at) if finished else None,
        "expires_at": None,
        "prompt": request["prompt"],
        "seconds": seconds_text(frames, fps),
        "size": f"{request['width']}x{request['height']}",
        "remixed_from_video_id": None,
        "error": _error(job),
        "width": request["width"],
        "height": request["height"],
        "num_frames": frames,
        "fps": fps,
        "seed": request["seed"],
        "num_inference_steps": request["num_inference_steps"],
        "cache": _cache(request),
        "steps_done": job.steps_done,
        "steps_total": job.steps_total,
        **_segments(job),
        "timings": job.all_timings,
    }


def seconds_text(num_frames: int, fps: int) -> str:
    """A video's duration as the API gives it: seconds, two decimals at most (81 frames at 16 fps: "5.06")."""
    return f"{num_frames / fps:.2f}".rstrip("0").rstrip(".")


def _cache(request: dict[str, Any]) -> dict[str, Any] | None:
    """The step cache the job runs under: its policy and that policy's own keys (a record holds
    those not at their defaults, `config.cache_values`; None: a record of before requests chose
    their cache)."""
    policy = request.get("cache_policy")
    if policy is None:
        return None
    return {"cache_policy": policy, **{key: request.get(key, ROUTES[key][1].default) for key in policy_keys(policy)}}


def _percent(job: Job) -> int:
    """The share of the denoising steps done; 100 once completed only (after its steps, a job
    still decodes and writes its video)."""
    if job.status is JobStatus.SUCCEEDED:
        return 100
    return min(99, 100 * job.steps_done // job.steps_total) if job.steps_total else 0


def _segments(job: Job) -> dict[str, int]:
    """How many of the video's segments are denoised (each has the same steps: a video made in one
    piece is one segment); the partial content holds their frames, less the encoder's lookahead."""
    total = job.request.get("segments", 1)  # a record of before segments: one
    done = total if job.status is JobStatus.SUCCEEDED else total * job.steps_done // job.steps_total if job.steps_total else 0
    return {"segments_done": done, "segments_total": total}


def _error(job: Job) -> dict[str, str] | None:
    if job.status is JobStatus.CANCELLED:
        return {"code": "cancelled", "message": "cancelled by its client (DELETE) before it finished"}
    if job.status is JobStatus.FAILED:
        return {"code": "generation_failed", "message": job.error or "failed"}
    return None
