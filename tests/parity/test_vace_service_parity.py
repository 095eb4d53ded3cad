"""`wanjax generate` of a VACE checkpoint folder written by diffusers' WanVACEPipeline, through
the service (checkpoint loading, prompts, control latents, denoiser, reference frames dropped
before decoding), against the pipeline itself with the same noise: final latents within 1e-4
of max|ref|, frames within 1 level, fp32, sigma_schedule=diffusers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tiny_wan import tiny_wan_vace_pipeline
from vace_inputs import FRAMES, HEIGHT, MODES, WIDTH, inputs, to_pil

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.errors import InvalidRequestError

PROMPT, NEGATIVE, STEPS, GUIDANCE, MAX_LEN = "a small red boat", "blurry", 3, 5.0, 16


@pytest.fixture(scope="module")
def vace_checkpoint(tmp_path_factory: pytest.TempPathFactory):
    pipe = tiny_wan_vace_pipeline()
    folder = tmp_path_factory.mktemp("vace-checkpoint")
    pipe.save_pretrained(folder)
    return pipe, folder


def service_for(folder) -> tuple[object, object]:
    config = resolve_config(str(folder), {
        "dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN),
        "height": str(HEIGHT), "width": str(WIDTH), "num_frames": str(FRAMES), "num_inference_steps": str(STEPS),
        "guidance_scale": str(GUIDANCE), "negative_prompt": NEGATIVE,
    })  # fmt: skip
    return config, build_container(config).service()


@pytest.mark.parametrize("mode", MODES)
def test_generate_matches_wan_vace_pipeline(vace_checkpoint, mode: str) -> None:
    pipe, folder = vace_checkpoint
    video, mask, references = inputs(mode)
    latent_frames = len(references) + (FRAMES - 1) // 4 + 1
    initial = torch.randn(1, 16, latent_frames, HEIGHT // 8, WIDTH // 8, generator=torch.Generator().manual_seed(3))
    pil_video, pil_mask, pil_references = to_pil(video, mask, references)
    common = dict(
        prompt=PROMPT, negative_prompt=NEGATIVE, video=pil_video, mask=pil_mask, reference_images=pil_references,
        height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
        max_sequence_length=MAX_LEN,
    )  # fmt: skip
    expected = pipe(**common, latents=initial.clone(), output_type="latent").frames.numpy()
    config, service = service_for(folder)
    request = config.request(PROMPT, control_video=video, mask=mask, reference_image=tuple(references))
    got = service.generate(request, initial_latents=initial.numpy(), output_type="latent").array
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()

    if mode == "video-mask-references":  # the decoded video leaves out the references' frames
        frames = (pipe(**common, latents=initial.clone(), output_type="np").frames * 255).round().astype(np.uint8)
        ours = service.generate(request, initial_latents=initial.numpy()).array
        assert ours.shape == frames.shape == (1, FRAMES, HEIGHT, WIDTH, 3)
        assert np.abs(ours.astype(int) - frames.astype(int)).max() <= 1


def test_vace_inputs_to_a_model_without_vace_blocks_are_refused_before_loading(tiny_checkpoint) -> None:
    config, service = service_for(tiny_checkpoint)
    video, mask, _ = inputs("video-mask")
    with pytest.raises(InvalidRequestError, match="no VACE blocks"):
        service.check([config.request(PROMPT, control_video=video, mask=mask)])


def test_a_control_video_of_another_length_is_named(vace_checkpoint) -> None:
    _, folder = vace_checkpoint
    config, service = service_for(folder)
    video, _, _ = inputs("video")
    with pytest.raises(InvalidRequestError, match=r"VACE video has shape \(5, 32, 48, 3\)"):
        service.check([config.request(PROMPT, control_video=video[:5])])
