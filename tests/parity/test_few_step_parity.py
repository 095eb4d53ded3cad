"""Few-step distilled sampling against diffusers: the schedule, the Euler steps, and a whole
Wan 2.2 A14B run with a LoRA per expert, 4 listed timesteps and no guidance.

Diffusers takes a distilled timestep list as sigmas: FlowMatchEulerDiscreteScheduler(shift)
.set_timesteps(sigmas=[t / 1000 ...]) shifts them and appends 0, which is the LightX2V /
Lightning recipe (see `wanjax.domain.scheduling.few_step`). Pipeline tolerance as the other
pipeline parity tests: final latents within 1e-4 of max|ref| (fp32).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline
from lora_files import load_in_diffusers, write_lora

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.scheduling import few_step_euler_table, solver_step

FOUR_STEPS = (1000, 750, 500, 250)
LISTS = (FOUR_STEPS, (1000, 800, 600, 400, 200), (999, 500.5, 1), (700,))


def _listed(shift: float, timesteps) -> FlowMatchEulerDiscreteScheduler:
    scheduler = FlowMatchEulerDiscreteScheduler(shift=shift)
    scheduler.set_timesteps(sigmas=[t / 1000 for t in timesteps])
    return scheduler


@pytest.mark.parametrize("shift", (1.0, 5.0, 8.0))
@pytest.mark.parametrize("timesteps", LISTS)
def test_schedule_equals_diffusers_sigmas_path(timesteps, shift):
    table, scheduler = few_step_euler_table(timesteps, shift), _listed(shift, timesteps)
    np.testing.assert_array_equal(table.timesteps, scheduler.timesteps.numpy())
    np.testing.assert_array_equal(table.sigmas, scheduler.sigmas.numpy())


@pytest.mark.parametrize("timesteps", LISTS)
def test_euler_steps_equal_diffusers(timesteps):
    table, scheduler = few_step_euler_table(timesteps, 5.0), _listed(5.0, timesteps)
    sample = np.random.default_rng(0).standard_normal((1, 4, 3, 5, 6)).astype(np.float32)
    state, reference = table.initial_state(sample), torch.from_numpy(sample)
    for i, t in enumerate(scheduler.timesteps):
        velocity = np.tanh(state.sample) * (t.item() / 1000) + 0.1 * state.sample  # a stand-in model
        state = solver_step(state, velocity, table.row(i))
        reference = scheduler.step(torch.from_numpy(velocity), t, reference).prev_sample
        np.testing.assert_allclose(state.sample, reference.numpy(), rtol=0, atol=2e-6 * np.abs(reference.numpy()).max())


PROMPT, SIZE, MAX_LEN = "a lighthouse in a storm", dict(height=32, width=48, num_frames=9), 16


def test_a14b_four_steps_with_a_lora_per_expert_match_diffusers(tiny_a14b_checkpoint, tmp_path):
    weights = DiffusersCheckpoint(tiny_a14b_checkpoint).weights("transformer")
    shapes = {name: weights[name].shape for name in weights}
    high = write_lora(tmp_path / "high.safetensors", "original", shapes, np.random.default_rng(4))
    low = write_lora(tmp_path / "low.safetensors", "lightx2v", shapes, np.random.default_rng(5))
    noise = torch.randn(1, 16, 3, 4, 6, generator=torch.Generator().manual_seed(5))

    pipe = WanPipeline.from_pretrained(tiny_a14b_checkpoint)  # boundary_ratio 0.875: 2 + 2 steps here
    pipe.set_progress_bar_config(disable=True)
    load_in_diffusers(pipe, "transformer", [(high, 1.0)])
    load_in_diffusers(pipe, "transformer_2", [(low, 0.6)])
    pipe.scheduler = FlowMatchEulerDiscreteScheduler(shift=5.0)
    listed = pipe.scheduler.set_timesteps
    pipe.scheduler.set_timesteps = lambda *_, device=None: listed(sigmas=[t / 1000 for t in FOUR_STEPS], device=device)
    expected = pipe(
        prompt=PROMPT, **SIZE, num_inference_steps=4, guidance_scale=1.0, max_sequence_length=MAX_LEN,
        latents=noise, output_type="latent",
    ).frames.numpy()  # fmt: skip

    config = resolve_config(str(tiny_a14b_checkpoint), {
        "dtype": "float32", "max_sequence_length": str(MAX_LEN), "flow_shift": "5", "guidance_scale": "1",
        "sample_timesteps": "1000,750,500,250", "expert_switch_step": "2",
        "loras": [f"{high}:1.0"], "loras_low": [f"{low}:0.6"],
    })  # fmt: skip
    service = build_container(config).service()
    got = service.generate(config.request(PROMPT, **SIZE), initial_latents=noise.numpy(), output_type="latent").array
    error = np.abs(got - expected).max() / np.abs(expected).max()
    assert error <= 1e-4, f"relative error {error:.2e}"
