"""The HTTP server and per-request LoRAs on a quantized transformer (issue 44, item 6): the tiny
checkpoint's transformer as a Q8_0 GGUF file (its FFNs' down kernels packed, the rest float), served
in-process (Starlette's test client over a real JobRunner and service) with a LoRA folder. A job
generates the video the service makes directly; a job naming a LoRA computes what that LoRA merged at
load into the dequantized weights computes (the delta added to each layer's dequantized kernel inside
the step), and the model without it comes back bit for bit; LoRAs merged at load are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from in_process_server import finished, in_process_server
from lora_files import write_lora
from quantized_files import dequantized, write_gguf
from safetensors.numpy import load_file, save_file

from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.container import build_container
from wanjax.application.lora_folder import LoraFolder
from wanjax.application.presets import resolve_config
from wanjax.domain.errors import CheckpointError
from wanjax.domain.lora import LoraSpec

SETTINGS = {"dtype": "float32", "height": "32", "width": "48", "num_frames": "5", "num_inference_steps": "2",
            "max_sequence_length": "8", "request_loras": "true"}  # fmt: skip


@pytest.fixture(scope="module")
def served(tiny_checkpoint, tmp_path_factory):
    """(config, service, runner, client, folder) of a server on the tiny checkpoint with a Q8_0 transformer."""
    folder = tmp_path_factory.mktemp("quantized-serve")
    tensors = load_file(tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors")
    gguf_file = write_gguf(tensors, folder / "wan-Q8_0.gguf", "Q8_0")
    assert transformer_weights(gguf_file).block_kernel_bytes() == 34 / 32  # the FFNs' down kernels stay packed
    (folder / "loras").mkdir()
    shapes = {name: tensor.shape for name, tensor in tensors.items()}
    write_lora(folder / "loras" / "style.safetensors", "diffusers", shapes, np.random.default_rng(0), magnitude=0.5)
    config = resolve_config(str(tiny_checkpoint), {**SETTINGS, "transformer_file": str(gguf_file)})
    service = build_container(config).service()
    (folder / "out").mkdir()
    with in_process_server(service, config, folder / "out", loras=LoraFolder(folder / "loras")) as (runner, client):
        yield config, service, runner, client, folder


def _latents(service, config, **fields) -> np.ndarray:
    return service.generate(config.request("a fox", seed=3, **fields), output_type="latent").array


def test_a_job_on_a_gguf_transformer_is_the_video_the_service_makes(served, tmp_path):
    config, service, runner, client, _ = served
    response = client.post("/v1/videos", json={"prompt": "a fox", "seed": 3})
    assert response.status_code == 202, response.text
    video = finished(client, response.json()["id"])
    assert video["status"] == "completed", video["error"]
    frames = service.generate(config.request("a fox", seed=3)).array[0]
    Mp4Sink().write(frames, tmp_path / "direct.mp4", fps=config.sampling.fps)
    assert runner.files.video(video["id"]).read_bytes() == (tmp_path / "direct.mp4").read_bytes()


def test_a_request_lora_on_a_quantized_transformer_equals_it_merged_into_the_dequantized_weights(
    served, tiny_checkpoint
):
    config, service, _, client, folder = served
    base = _latents(service, config)
    loras = [{"name": "style.safetensors", "scale": 0.8}]
    response = client.post("/v1/videos", json={"prompt": "a fox", "loras": loras})
    assert response.status_code == 202, response.text
    video = finished(client, response.json()["id"])
    assert video["status"] == "completed", video["error"]
    lora = folder / "loras" / "style.safetensors"
    got = _latents(service, config, loras=[LoraSpec(str(lora), 0.8)])

    tensors = load_file(tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors")
    save_file(dequantized(tensors, "Q8_0"), folder / "dequantized.safetensors")
    at_load = {**SETTINGS, "request_loras": "false", "loras": f"{lora}:0.8",
               "transformer_file": str(folder / "dequantized.safetensors")}  # fmt: skip
    merged = resolve_config(str(tiny_checkpoint), at_load)
    expected = _latents(build_container(merged).service(), merged)
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()
    assert np.abs(expected - base).max() > 1e-2 * np.abs(expected).max()  # the LoRA does change it
    np.testing.assert_array_equal(_latents(service, config), base)  # the packed kernels untouched


def test_loras_merged_at_load_into_a_quantized_transformer_are_refused_naming_the_fix(served, tiny_checkpoint):
    config, *_, folder = served
    at_load = {**SETTINGS, "request_loras": "false", "transformer_file": config.model.transformer_file,
               "loras": str(folder / "loras" / "style.safetensors")}  # fmt: skip
    merged = resolve_config(str(tiny_checkpoint), at_load)
    with pytest.raises(CheckpointError, match=r"merged at load .*request_loras=true.*bf16 release"):
        _latents(build_container(merged).service(), merged)
