"""The HTTP server on a quantized transformer (issue 44, item 6): the tiny checkpoint's transformer as a
Q8_0 GGUF file, served in-process (Starlette's test client over a real JobRunner and service) with a
LoRA folder; a job generates the video the service makes directly, and a request naming a LoRA is a
422 that names the field, the quantized file and the fix, before anything is queued."""

from __future__ import annotations

import time

import numpy as np
import pytest
from lora_files import write_lora
from quantized_files import write_gguf
from safetensors.numpy import load_file
from starlette.testclient import TestClient

from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.container import build_container
from wanjax.application.job_runner import JobRunner
from wanjax.application.lora_folder import LoraFolder
from wanjax.application.presets import resolve_config
from wanjax.entrypoints.http_api import build_app

SETTINGS = {"dtype": "float32", "height": "32", "width": "48", "num_frames": "5", "num_inference_steps": "2",
            "max_sequence_length": "8", "request_loras": "true"}  # fmt: skip


@pytest.fixture(scope="module")
def served(tiny_checkpoint, tmp_path_factory):
    """(config, service, runner, client) of a server on the tiny checkpoint with a Q8_0 transformer."""
    folder = tmp_path_factory.mktemp("quantized-serve")
    tensors = load_file(tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors")
    gguf_file = write_gguf(tensors, folder / "wan-Q8_0.gguf", "Q8_0")
    assert transformer_weights(gguf_file).block_kernel_bytes() == 34 / 32  # the FFNs' down kernels stay packed
    (folder / "loras").mkdir()
    shapes = {name: tensor.shape for name, tensor in tensors.items()}
    write_lora(folder / "loras" / "style.safetensors", "diffusers", shapes, np.random.default_rng(0), magnitude=0.5)
    config = resolve_config(str(tiny_checkpoint), {**SETTINGS, "transformer_file": str(gguf_file)})
    service = build_container(config).service()
    runner = JobRunner(service, config, SqliteJobStore(folder / "jobs.sqlite"), output_dir=folder / "out",
                       queue_capacity=2, max_batch=1, loras=LoraFolder(folder / "loras"))  # fmt: skip
    runner.start()
    yield config, service, runner, TestClient(build_app(runner))
    runner.stop(timeout=60)


def _finished(client, video_id):
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        video = client.get(f"/v1/videos/{video_id}").json()
        if video["status"] in ("completed", "failed"):
            return video
        time.sleep(0.1)
    raise TimeoutError(f"video {video_id} did not finish")


def test_a_job_on_a_gguf_transformer_is_the_video_the_service_makes(served, tmp_path):
    config, service, runner, client = served
    response = client.post("/v1/videos", json={"prompt": "a fox", "seed": 3})
    assert response.status_code == 202, response.text
    video = _finished(client, response.json()["id"])
    assert video["status"] == "completed", video["error"]
    frames = service.generate(config.request("a fox", seed=3)).array[0]
    Mp4Sink().write(frames, tmp_path / "direct.mp4", fps=config.sampling.fps)
    assert runner.files.video(video["id"]).read_bytes() == (tmp_path / "direct.mp4").read_bytes()


def test_a_request_lora_on_a_quantized_transformer_is_a_422_naming_the_fix(served):
    *_, runner, client = served
    before = client.get("/v1/videos").json()["data"]
    response = client.post("/v1/videos", json={"prompt": "a fox", "loras": [{"name": "style.safetensors"}]})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("loras: ") and "quantized transformer file" in message and "bf16" in message
    assert client.get("/v1/videos").json()["data"] == before  # nothing queued
