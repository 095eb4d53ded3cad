"""Every invalid request field (and mode option) is refused on construction, with a message naming
field and fix."""

import numpy as np
import pytest

from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.animate.options import AnimateOptions
from wanjax.domain.modes.video_to_video import VideoToVideoOptions
from wanjax.domain.requests import GenerationRequest

VALID = dict(
    prompt="a cat", height=480, width=832, num_frames=81, num_inference_steps=50,
    guidance_scale=5.0, flow_shift=3.0, seed=0,
)  # fmt: skip


def test_valid_request_builds():
    request = GenerationRequest(**VALID)
    assert request.uses_guidance


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("height", 500, "multiple of 16; use 496 or 512"),
        ("width", 8, "from 16 to 16384"),
        ("width", 832.0, "integer"),
        ("height", 16400, "from 16 to 16384"),
        ("num_frames", 80, "4k+1"),
        ("num_frames", 0, "from 1 to 4093"),
        ("num_frames", 4097, "from 1 to 4093"),
        ("num_inference_steps", 0, "from 1 to 1000"),
        ("num_inference_steps", 1001, "from 1 to 1000"),
        ("num_inference_steps", 10**12, "from 1 to 1000"),
        ("sample_timesteps", list(range(2000, 0, -1)), "1 to 1000 training timesteps"),
        ("prompt", "a fox " * 4000, "at most 20000 characters"),
        ("negative_prompt", "blurry " * 4000, "at most 20000 characters"),
        ("guidance_scale", -1.0, ">= 0"),
        ("guidance_scale", float("nan"), ">= 0"),
        ("flow_shift", 0.0, "from 0.01 to 100"),
        ("flow_shift", 1e300, "from 0.01 to 100"),
        ("flow_shift", float("nan"), "from 0.01 to 100"),
        ("expert_switch_step", 1001, "from 0 to 1000"),
        ("sample_timesteps", tuple(1000 - i / 2 for i in range(1001)), "1 to 1000 training timesteps"),
        ("seed", -3, "[0,"),
        ("prompt", "   ", "non-empty"),
        ("negative_prompt", None, "text"),
        ("sample_solver", "ddim", "unipc, dpm++, euler"),
        ("sigma_schedule", "karras", "official, diffusers"),
    ],
)
def test_invalid_field_is_named(field, value, expected):
    with pytest.raises(InvalidRequestError) as err:
        GenerationRequest(**{**VALID, field: value})
    assert field in str(err.value)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    "options, field, value, expected",
    [
        (AnimateOptions, "segment_frame_length", list(range(10**5)), "4k+1 from 5 to 4093"),  # stored per job untyped
        (AnimateOptions, "segment_frame_length", 78, "4k+1 from 5 to 4093"),
        (AnimateOptions, "segment_frame_length", 1, "4k+1 from 5 to 4093"),
        (AnimateOptions, "segment_frame_length", 4097, "4k+1 from 5 to 4093"),
        (AnimateOptions, "prev_segment_conditioning_frames", 3, "must be 1 or 5"),
        (AnimateOptions, "prev_segment_conditioning_frames", True, "must be 1 or 5"),
        (AnimateOptions, "prev_segment_conditioning_frames", "5", "must be 1 or 5"),
        (VideoToVideoOptions, "strength", 0, "in (0, 1]"),
        (VideoToVideoOptions, "strength", True, "in (0, 1]"),
    ],
)
def test_an_invalid_mode_option_is_named(options, field, value, expected):
    with pytest.raises(InvalidRequestError) as err:
        options(**{field: value})
    assert f"{field}=" in str(err.value) and expected in str(err.value)
    with pytest.raises(InvalidRequestError, match=field):  # a config default is checked by its mode's options
        GenerationConfig.from_mapping({}).request("x", **{field: value})


@pytest.mark.parametrize(
    "field, value",
    [("num_inference_steps", 1), ("num_inference_steps", 1000), ("flow_shift", 0.01), ("flow_shift", 100.0),
     ("height", 16384), ("num_frames", 4093), ("sample_timesteps", tuple(range(1000, 0, -1)))],
)  # fmt: skip
def test_the_ends_of_each_range_are_accepted(field, value):
    assert getattr(GenerationRequest(**{**VALID, field: value}), field) == value


@pytest.mark.parametrize(
    "field, value", [("segment_frame_length", 5), ("segment_frame_length", 4093), ("prev_segment_conditioning_frames", 5)]
)
def test_the_ends_of_each_options_range_are_accepted(field, value):
    assert getattr(AnimateOptions(**{field: value}), field) == value


def test_dpm_on_the_diffusers_grid_is_refused_with_the_fix():
    with pytest.raises(InvalidRequestError, match="sample_solver=dpm\\+\\+ with sigma_schedule=diffusers.*set sigma_schedule=official"):
        GenerationRequest(**{**VALID, "sample_solver": "dpm++", "sigma_schedule": "diffusers"})


def test_guidance_at_or_below_one_turns_cfg_off():
    assert not GenerationRequest(**{**VALID, "guidance_scale": 1.0}).uses_guidance


def test_config_fills_request_defaults_and_overrides():
    request = GenerationConfig.from_mapping(dict(height=256, width=256, num_frames=9)).request("x", num_frames=5, seed=None)
    assert (request.height, request.num_frames, request.seed) == (256, 5, 0)


@pytest.mark.parametrize(
    "image",
    [np.zeros((8, 8), np.uint8), np.zeros((8, 8, 4), np.uint8), np.zeros((8, 8, 3), np.float32), "cat.png", np.zeros((0, 8, 3), np.uint8)],
)
def test_image_must_be_rgb_uint8_pixels(image):
    with pytest.raises(InvalidRequestError, match="image="):
        GenerationConfig.from_mapping({}).request("x", image=image)


def test_image_is_carried():
    pixels = np.zeros((5, 7, 3), np.uint8)
    assert GenerationConfig.from_mapping({}).request("x", image=pixels).input("image") is pixels
