"""The built-in demo checkpoint is a real diffusers-format Wan checkpoint: diffusers loads it and
agrees with wanjax on it (same tolerance as the tiny-pipeline parity: 1e-4 of max|ref|)."""

import numpy as np
import torch

from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint, write_demo_checkpoint
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config


def test_diffusers_loads_the_demo_and_agrees(demo_cache):
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(demo_cache)
    pipe.set_progress_bar_config(disable=True)
    noise = torch.randn(1, 16, 2, 4, 6, generator=torch.Generator().manual_seed(0))
    expected = pipe(
        prompt="a fox", negative_prompt="", height=32, width=48, num_frames=5, num_inference_steps=3,
        guidance_scale=5.0, max_sequence_length=64, latents=noise.clone(), output_type="latent",
    ).frames.numpy()  # fmt: skip

    config = resolve_config(str(demo_cache), {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": "64"})
    request = config.request("a fox", height=32, width=48, num_frames=5, num_inference_steps=3, flow_shift=3.0)
    got = build_container(config).service().generate(request, initial_latents=noise.numpy(), output_type="latent")
    error = np.max(np.abs(got.array - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"


def test_demo_is_written_once_and_deterministically(demo_cache, tmp_path):
    assert ensure_demo_checkpoint(demo_cache.parent) == demo_cache  # already there: not rewritten
    write_demo_checkpoint(tmp_path / "again")
    for name in ("transformer/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors"):
        assert (tmp_path / "again" / name).read_bytes() == (demo_cache / name).read_bytes()
