"""The HTTP API's request parsing, in-process (Starlette's test client) over a runner that is not
started: JSON and multipart submissions, and the errors for bodies that are neither."""

import base64
import io
import json

import numpy as np
import pytest
from fakes import FakeDenoiser, fake_service
from PIL import Image
from starlette.testclient import TestClient

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_runner import JobRunner
from wanjax.domain.config import GenerationConfig
from wanjax.domain.conditioning import ImageConditioning
from wanjax.entrypoints.http_api import build_app

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))


@pytest.fixture
def runner(tmp_path):
    """An image-to-video model that also runs without an image (as TI2V does)."""
    service = fake_service(FakeDenoiser, image_conditioning=ImageConditioning.FIRST_FRAME)
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    return JobRunner(service, CONFIG, store, output_dir=tmp_path, queue_capacity=4, max_batch=1)


@pytest.fixture
def client(runner):
    return TestClient(build_app(runner))


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 12, 3), 200, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _multipart(**parts) -> dict:
    """A multipart/form-data body: str values as fields, bytes as file parts."""
    boundary, chunks = "wanjax-test-boundary", []
    for name, value in parts.items():
        if isinstance(value, bytes):
            head, data = f'form-data; name="{name}"; filename="{name}.png"\r\nContent-Type: image/png', value
        else:
            head, data = f'form-data; name="{name}"', value.encode()
        chunks.append(f"--{boundary}\r\nContent-Disposition: {head}\r\n\r\n".encode() + data + b"\r\n")
    content = b"".join(chunks) + f"--{boundary}--\r\n".encode()
    return {"content": content, "headers": {"content-type": f"multipart/form-data; boundary={boundary}"}}


def test_a_multipart_image_is_kept_with_the_job_as_its_json_form(client, runner):
    fields = {"prompt": "a cat", "seed": 7}
    response = client.post("/v1/videos", **_multipart(request=json.dumps(fields), image=_png()))
    assert response.status_code == 202 and response.json()["status"] == "queued"
    body = json.loads(runner.get(response.json()["id"]).body)
    assert body == {**fields, "image": base64.b64encode(_png()).decode()}


def test_multipart_without_an_image_and_json_with_a_base64_image_are_accepted(client):
    assert client.post("/v1/videos", **_multipart(request=json.dumps({"prompt": "a cat"}))).status_code == 202
    body = {"prompt": "a cat", "image": base64.b64encode(_png()).decode()}
    assert client.post("/v1/videos", json=body).status_code == 202


@pytest.mark.parametrize(
    ("parts", "named"),
    [({"request": "{not json"}, "not JSON"), ({"image": _png()}, "request"), ({"request": "[1, 2]"}, "request"),
     ({"request": json.dumps({"prompt": "x", "image": "AAAA"}), "image": _png()}, "image"),
     ({"request": json.dumps({"prompt": "x"}), "image": b"not an image"}, "image"),
     ({"request": json.dumps({"prompt": "x"}), "picture": _png()}, "picture")],
)  # fmt: skip
def test_a_bad_multipart_submission_is_422_naming_what_is_wrong_and_queues_nothing(client, runner, parts, named):
    response = client.post("/v1/videos", **_multipart(**parts))
    assert response.status_code == 422 and named in response.json()["error"]
    assert "wanjax_queue_depth 0" in runner.metrics.text()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'"a cat"'])
def test_a_body_that_is_not_a_json_object_is_422(client, content):
    response = client.post("/v1/videos", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON object" in response.json()["error"]
