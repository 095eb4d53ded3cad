"""Input images: unreadable files are named; fitting equals diffusers' VideoProcessor.preprocess."""

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.images import fit_image, read_image
from wanjax.domain.errors import InvalidRequestError


def test_reads_rgb_from_png_and_converts_other_modes(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (9, 13, 4), dtype=np.uint8)
    Image.fromarray(pixels, "RGBA").save(tmp_path / "a.png")
    got = read_image(tmp_path / "a.png")
    assert got.shape == (9, 13, 3) and got.dtype == np.uint8


@pytest.mark.parametrize("content, message", [(None, "does not exist"), (b"not an image", "not a readable")])
def test_unreadable_image_is_named(tmp_path, content, message):
    path = tmp_path / "x.png"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidRequestError, match=message):
        read_image(path)


def test_fit_equals_diffusers_video_processor():
    from diffusers.video_processor import VideoProcessor

    pixels = np.random.default_rng(1).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    expected = VideoProcessor(vae_scale_factor=8).preprocess(Image.fromarray(pixels), height=48, width=32)
    expected = expected[0].permute(1, 2, 0).numpy()  # [H, W, 3] in [-1, 1]
    np.testing.assert_allclose(fit_image(pixels, 48, 32), expected, atol=1e-6)
