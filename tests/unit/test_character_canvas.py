"""Wan 2.2 Animate's character, resized, as each reference makes it: the canvas and CLIP's input
against the references' own preprocessing, called here, for non-square characters of other sizes
than the video whose scaled sides come out odd.

- official (`wan/animate.py`): `WanAnimate.padding_resize` (OpenCV's INTER_LINEAR, so OpenCV
  itself, installed with the test extras) and `CLIPModel.visual`'s preprocessing, recorded where it
  hands the pixels to its model;
- diffusers: the `WanAnimateImageProcessor` its `WanAnimatePipeline` builds, with the arguments it
  builds it with, and the CLIP image processor `encode_image` runs on the image as given.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

from official_wan import OpenClipTransforms, official_animate

from wanjax.adapters.media.letterbox import character_canvas, linear_resize
from wanjax.adapters.torch.clip_image import ClipImageEncoder, wan_clip_preprocessing

VIDEO = (48, 80)  # height, width
CLIP_SIZE = 28
# (height, width): taller and wider than the video, smaller and larger, each with an odd scaled side
# on both references (official: int(), diffusers: //)
CHARACTERS = [(37, 23), (20, 37), (301, 199), (100, 177), (5, 2), (3, 11)]


def _character(height: int, width: int) -> np.ndarray:
    return np.random.default_rng(height * 1000 + width).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _scaled_sides(height: int, width: int) -> tuple[int, int]:
    """The side each reference computes for the dimension that does not fill the canvas."""
    (canvas_height, canvas_width), wider = VIDEO, width / height > VIDEO[1] / VIDEO[0]
    if wider:
        return int(canvas_width / width * height), height * canvas_width // width
    return int(canvas_height / height * width), width * canvas_height // height


@pytest.mark.parametrize(("height", "width"), CHARACTERS)
def test_the_characters_need_resizing_to_odd_sides(height, width):
    assert all(side % 2 for side in _scaled_sides(height, width))


@pytest.mark.parametrize(("source", "target"), [((1, 1), (3, 5)), ((3, 300), (300, 3)), ((37, 23), (48, 31)),
                                                ((301, 199), (72, 47)), ((20, 10), (40, 20)), ((40, 20), (20, 10))])
def test_linear_resize_is_opencvs_bit_for_bit(source, target):
    image = _character(*source)
    expected = cv2.resize(image, target[::-1], interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(linear_resize(image, *target), expected)


@pytest.mark.parametrize(("height", "width"), CHARACTERS)
def test_the_official_canvas_is_padding_resizes(height, width):
    image = _character(height, width)
    expected = official_animate().WanAnimate.padding_resize(None, image, height=VIDEO[0], width=VIDEO[1])
    np.testing.assert_array_equal(character_canvas(image, *VIDEO, "official"), expected)


@pytest.mark.parametrize(("height", "width"), CHARACTERS)
def test_the_diffusers_canvas_is_the_pipelines_image_processors(height, width):
    from diffusers.pipelines.wan.image_processor import WanAnimateImageProcessor

    image = _character(height, width)
    # as WanAnimatePipeline.__init__ builds it and __call__ runs it (a PIL image, resize_mode="fill")
    processor = WanAnimateImageProcessor(
        vae_scale_factor=8, spatial_patch_size=(2, 2), resample="bilinear", fill_color=0
    )
    pixels = processor.preprocess(Image.fromarray(image), height=VIDEO[0], width=VIDEO[1], resize_mode="fill")
    expected = np.round((pixels[0].permute(1, 2, 0).numpy() + 1) / 2 * 255).astype(np.uint8)  # [-1, 1] -> uint8
    np.testing.assert_array_equal(character_canvas(image, *VIDEO, "diffusers"), expected)
    assert processor.config.resample == "lanczos"  # what it runs with, whatever the pipeline asked for


@pytest.fixture(scope="module")
def encoder() -> ClipImageEncoder:
    config = CLIPVisionConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                              image_size=CLIP_SIZE, patch_size=14)  # fmt: skip
    return ClipImageEncoder(CLIPImageProcessor(**wan_clip_preprocessing(CLIP_SIZE)), CLIPVisionModel(config))


class _Recorded(Exception):
    """Raised by the recording model with the pixels CLIPModel.visual gave it."""


class _RecordingModel:
    image_size = CLIP_SIZE

    def visual(self, pixels, use_31_block):
        raise _Recorded(pixels)


def _official_clip_pixels(canvas: np.ndarray) -> torch.Tensor:
    """What `WanAnimate.generate` hands CLIP's model for a canvas: the canvas as its batch holds it
    (`refer_images / 127.5 - 1`, here in float32 for its bfloat16), through `CLIPModel.visual`."""
    official_animate()
    from wan.modules.animate.clip import CLIPModel

    clip = object.__new__(CLIPModel)
    clip.model, clip.transforms = _RecordingModel(), OpenClipTransforms()
    clip.dtype, clip.device = torch.float32, torch.device("cpu")
    reference = torch.tensor(canvas / 127.5 - 1).permute(2, 0, 1)[None].to(torch.float32)  # [1, C, H, W]
    image = reference[:, :, None][0, :, 0]  # "t c h w -> 1 c t h w", then [0, :, 0]: [C, H, W]
    with pytest.raises(_Recorded) as recorded:
        clip.visual([image[:, None, :, :]])
    return recorded.value.args[0]


@pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.autocast.*:FutureWarning", "ignore:.*CUDA is not available")
@pytest.mark.parametrize(("height", "width"), CHARACTERS)
def test_clip_sees_the_official_canvas_squashed(encoder, height, width):
    canvas = character_canvas(_character(height, width), *VIDEO, "official")
    expected = _official_clip_pixels(canvas)
    ours = encoder.pixel_values([canvas], squash=True)
    assert ours.shape == expected.shape == (1, 3, CLIP_SIZE, CLIP_SIZE)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)


@pytest.mark.parametrize(("height", "width"), CHARACTERS)
def test_clip_sees_diffusers_image_as_given(encoder, height, width):
    image = _character(height, width)
    expected = encoder._processor(images=Image.fromarray(image), return_tensors="pt").pixel_values  # encode_image's
    torch.testing.assert_close(encoder.pixel_values([image]), expected, rtol=0, atol=0)
