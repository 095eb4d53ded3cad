"""Wan 2.2 T2V A14B: two experts switched at a boundary timestep, a guidance scale per expert.

Compared with diffusers' WanPipeline (transformer + transformer_2 + boundary_ratio) on the
same tiny random checkpoint and initial latents. Tolerances as in the 2.1 pipeline parity:
final latents within 1e-4 of max|ref| (fp32), uint8 frames within 1 level.
"""

import numpy as np
import pytest
import torch

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, plan_sampling

PROMPT, NEGATIVE = "a lighthouse in a storm", "blurry"
SIZE = dict(height=32, width=48, num_frames=9)
GUIDANCE_HIGH, GUIDANCE_LOW, STEPS, MAX_LEN = 5.0, 2.5, 6, 16


@pytest.fixture(scope="module")
def pipe(tiny_a14b_checkpoint):
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(tiny_a14b_checkpoint)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def config(tiny_a14b_checkpoint):
    return resolve_config(
        str(tiny_a14b_checkpoint),
        {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN),
         "guidance_scale_2": str(GUIDANCE_LOW)},
    )


@pytest.fixture(scope="module")
def container(config):
    return build_container(config)


@pytest.fixture(scope="module")
def service(container):
    return container.service()


def _noise():
    return torch.randn(1, 16, 3, 4, 6, generator=torch.Generator().manual_seed(5))


def _reference(pipe, output_type, steps=STEPS):
    return pipe(
        prompt=PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=steps, guidance_scale=GUIDANCE_HIGH,
        guidance_scale_2=GUIDANCE_LOW, max_sequence_length=MAX_LEN, latents=_noise(), output_type=output_type,
    ).frames  # fmt: skip


def _ours(service, config, output_type):
    request = config.request(PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS, guidance_scale=GUIDANCE_HIGH)
    return service.generate(request, initial_latents=_noise().numpy(), output_type=output_type).array


def test_both_experts_run_in_this_plan(config):
    request = config.request(PROMPT, num_inference_steps=STEPS)
    experts = plan_sampling(request, num_experts=2, model_boundary_ratio=0.875).experts
    assert HIGH_NOISE in experts and LOW_NOISE in experts


def test_final_latents_match_diffusers(pipe, service, config):
    expected = _reference(pipe, "latent").numpy()
    got = _ours(service, config, "latent")
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"


def test_frames_match_diffusers_within_one_level(pipe, service, config):
    expected = (np.asarray(_reference(pipe, "np")) * 255).round().astype(np.uint8)
    got = _ours(service, config, "frames")
    assert np.max(np.abs(got.astype(int) - expected.astype(int))) <= 1


def _experts_diffusers_calls(pipe, steps, boundary_ratio):
    """Which expert diffusers runs at each step, observed through forward hooks."""
    calls = []
    hooks = [
        pipe.transformer.register_forward_hook(lambda *a: calls.append(HIGH_NOISE)),
        pipe.transformer_2.register_forward_hook(lambda *a: calls.append(LOW_NOISE)),
    ]
    pipe.register_to_config(boundary_ratio=boundary_ratio)
    try:
        pipe(prompt=PROMPT, **SIZE, num_inference_steps=steps, guidance_scale=1.0, max_sequence_length=MAX_LEN,
             latents=_noise(), output_type="latent")  # fmt: skip
    finally:
        pipe.register_to_config(boundary_ratio=0.875)
        for hook in hooks:
            hook.remove()
    return calls  # guidance 1.0: one call per step


@pytest.mark.parametrize("steps", [2, 5, 9, 16])
@pytest.mark.parametrize("boundary_ratio", [0.5, 0.875, 0.9, 0.97])
def test_expert_switch_is_at_the_step_diffusers_switches(pipe, config, steps, boundary_ratio):
    # The config carries the checkpoint's boundary_ratio (0.875): the request sets the one under test.
    request = config.request(PROMPT, num_inference_steps=steps, guidance_scale=1.0, boundary_ratio=boundary_ratio)
    plan = plan_sampling(request, num_experts=2)
    assert list(plan.experts) == _experts_diffusers_calls(pipe, steps, boundary_ratio)


def test_switching_experts_compiles_one_step(container, service, config, compile_counter):
    request = config.request(PROMPT, **SIZE, num_inference_steps=STEPS)
    service.generate(request, output_type="latent")  # compiles
    before = compile_counter.count
    service.generate(config.request("another prompt", **SIZE, num_inference_steps=9, guidance_scale_low=1.5, seed=4),
                     output_type="latent")  # fmt: skip
    assert compile_counter.count == before  # new steps, scales, prompt and seed: nothing recompiles
    assert container.denoiser().num_compiled == 1  # one executable served both experts
