"""Which inputs each model takes, and what a request with input media asks of the plan and the batch."""

import attrs
import numpy as np
import pytest

from wanjax.domain.architectures import WAN21_FLF2V_14B, WAN21_I2V_14B, WAN21_T2V_14B, WAN22_ANIMATE_14B, WAN22_I2V_A14B
from wanjax.domain.batch import shared_request
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import ModelTraits
from wanjax.domain.modes.image_to_video import frame_mask
from wanjax.domain.modes.registry import mode_for
from wanjax.domain.specs import VaeSpec
from wanjax.domain.plan import plan_sampling
from wanjax.domain.scheduling import sampler_table
from wanjax.domain.warmup import warmup_request

CONFIG = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=9, num_inference_steps=10, flow_shift=5.0))
IMAGE = np.zeros((8, 8, 3), np.uint8)
VIDEO = np.zeros((9, 8, 8, 3), np.uint8)
CHANNELS, NONE, FIRST = ImageConditioning.CHANNELS, ImageConditioning.NONE, ImageConditioning.FIRST_FRAME


def check_inputs(request, mode, spec):
    """The request's mode on a model of `spec` that takes an image as `mode`, checked."""
    return mode_for(request, ModelTraits(transformer=spec, vae=VaeSpec(), image_conditioning=mode))


@pytest.mark.parametrize(
    ("fields", "mode", "spec"),
    [
        ({}, NONE, WAN21_T2V_14B),
        ({"video": VIDEO}, NONE, WAN21_T2V_14B),
        ({"video": VIDEO}, FIRST, WAN21_T2V_14B),  # Wan 2.2 TI2V-5B without an image
        ({"image": IMAGE}, CHANNELS, WAN21_I2V_14B),
        ({"image": IMAGE, "last_image": IMAGE}, CHANNELS, WAN21_FLF2V_14B),
        ({"image": IMAGE, "last_image": IMAGE}, CHANNELS, WAN22_I2V_A14B),
    ],
)
def test_what_a_model_takes(fields, mode, spec):
    check_inputs(CONFIG.request("a fox", **fields), mode, spec)


@pytest.mark.parametrize(
    ("fields", "mode", "spec", "message"),
    [
        ({"image": IMAGE, "last_image": IMAGE}, CHANNELS, WAN21_I2V_14B, "reads one image.*wan2.1-flf2v-14b-720p"),
        ({"image": IMAGE, "last_image": IMAGE}, FIRST, WAN21_T2V_14B, "first frame only"),
        ({"image": IMAGE, "last_image": IMAGE}, NONE, WAN21_T2V_14B, "takes no image"),
        ({"video": VIDEO}, CHANNELS, WAN21_I2V_14B, "video-to-video .* runs on a text-to-video model"),
        ({"video": VIDEO}, CHANNELS, WAN22_I2V_A14B, "video-to-video .* runs on a text-to-video model"),
    ],
)
def test_what_a_model_refuses(fields, mode, spec, message):
    with pytest.raises(InvalidRequestError, match=message):
        check_inputs(CONFIG.request("a fox", **fields), mode, spec)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"last_image": IMAGE}, "needs the first frame too"),
        ({"video": VIDEO, "strength": 0.0}, r"must be a number in \(0, 1\]"),
        ({"video": VIDEO, "strength": 1.5}, r"must be a number in \(0, 1\]"),
        ({"video": VIDEO, "image": IMAGE}, "video-to-video takes no --image"),
        ({"video": VIDEO[:7]}, "fewer frames than num_frames=9.*at most 5"),
        ({"video": VIDEO[..., :2]}, r"RGB frames, a uint8 array \[F, H, W, 3\]"),
    ],
)
def test_requests_that_do_not_fit_together(fields, message):
    with pytest.raises(InvalidRequestError, match=message):
        CONFIG.request("a fox", **fields)


def test_video_to_video_runs_the_last_steps_of_the_full_grid():
    full = sampler_table("unipc", "official", 10, 5.0)
    plan = plan_sampling(CONFIG.request("a fox", video=VIDEO, strength=0.55))
    assert plan.num_steps == 5
    np.testing.assert_array_equal(plan.timesteps, full.timesteps[5:])
    assert plan_sampling(CONFIG.request("a fox", video=VIDEO)).num_steps == 8  # the default strength, 0.8
    distilled = CONFIG.request("a fox", video=VIDEO, strength=0.5, sample_timesteps=(1000, 750, 500, 250))
    assert list(plan_sampling(distilled).timesteps) == list(plan_sampling(attrs.evolve(
        distilled, inputs={}, options=None, sample_timesteps=(500, 250))).timesteps)  # fmt: skip


def test_the_warmup_of_a_video_to_video_request_runs_two_steps():
    short = warmup_request(CONFIG.request("a fox", video=VIDEO, strength=0.3), num_experts=2)
    assert plan_sampling(short, num_experts=2, model_boundary_ratio=0.9).num_steps == 2


@pytest.mark.parametrize(
    ("other", "field"),
    [
        ({"video": VIDEO + 1}, "video"),
        ({"video": VIDEO, "strength": 0.5}, "strength"),
        ({"video": None}, "video"),
    ],
)
def test_requests_with_other_media_or_strength_are_not_batched(other, field):
    first = CONFIG.request("a fox", video=VIDEO)
    with pytest.raises(InvalidRequestError, match=f"differs from request 0 in {field}"):
        shared_request([first, CONFIG.request("a cat", **{"video": VIDEO, **other})])
    assert shared_request([first, CONFIG.request("a cat", video=VIDEO.copy(), seed=4)]) is first


def test_the_last_frame_is_the_last_slot_of_the_last_latent_frame():
    first = frame_mask(3, 2, 2, 4)
    both = frame_mask(3, 2, 2, 4, last_frame=True)
    assert first[0, :, 0, 0].tolist() == [[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert both[0, :, 0, 0].tolist() == [[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 1]]


def test_an_animate_character_of_any_size_is_kept_as_given():
    """The run letterboxes it onto the video's canvas as its reference does (adapters/media/letterbox.py),
    and diffusers' CLIP reads it as given."""
    pose, face = np.zeros((5, 32, 48, 3), np.uint8), np.zeros((5, 16, 16, 3), np.uint8)
    inputs = {"pose_video": pose, "face_video": face}
    for size in ((32, 48, 3), (40, 24, 3)):
        assert CONFIG.request("a dancer", image=np.zeros(size, np.uint8), **inputs).input("image").shape == size


def test_a_setting_of_another_mode_is_refused_where_the_request_does_not_run_in_it():
    """Wan Animate's segment settings on a text-to-video model (nothing reads them) are refused; at
    their defaults they pass; on an Animate model they are the run's."""
    with pytest.raises(InvalidRequestError, match="segment_frame_length=33: a setting of the animate mode; this request "
                                                  "runs in text-to-video on this model"):  # fmt: skip
        check_inputs(CONFIG.request("a cat", segment_frame_length=33), NONE, WAN21_T2V_14B)
    with pytest.raises(InvalidRequestError, match="prev_segment_conditioning_frames=5: a setting of the animate mode"):
        check_inputs(CONFIG.request("a cat", prev_segment_conditioning_frames=5), NONE, WAN21_T2V_14B)
    with pytest.raises(InvalidRequestError, match="strength=0.5: a setting of the video-to-video mode; this request runs "
                                                  "in text-to-video on this model"):  # fmt: skip
        check_inputs(CONFIG.request("a cat", strength=0.5), NONE, WAN21_T2V_14B)
    assert check_inputs(CONFIG.request("a cat"), NONE, WAN21_T2V_14B).name == "text-to-video"
    pose, face = np.zeros((5, 32, 48, 3), np.uint8), np.zeros((5, 16, 16, 3), np.uint8)
    dancer = CONFIG.request("a dancer", image=np.zeros((32, 48, 3), np.uint8), pose_video=pose, face_video=face,
                            segment_frame_length=33)  # fmt: skip
    assert check_inputs(dancer, NONE, WAN22_ANIMATE_14B).name == "animate"
