"""The torch CLIP image encoder adapter against diffusers' `WanImageToVideoPipeline.encode_image`,
on the demo CLIP encoder and processor (tiny, random, written offline).

The reference gets PIL images, as a diffusers user passes them; ours gets the same pixels
as uint8 arrays. Same weights, same processor, same torch kernels: equal bit for bit,
in float32 and in bfloat16.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import WanImageToVideoPipeline
from PIL import Image
from transformers import CLIPImageProcessor, CLIPVisionModel

from wanjax.adapters.torch.clip_image import ClipImageEncoder
from wanjax.adapters.torch.demo_clip import write_demo_image_encoder, write_demo_image_processor

IMAGE_SIZE, PATCH_SIZE, HIDDEN_SIZE = 32, 8, 32


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo_clip")
    write_demo_image_encoder(root / "image_encoder", seed=0, image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)
    write_demo_image_processor(root / "image_processor", image_size=IMAGE_SIZE)
    return root


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    """Odd sizes and aspect ratios, so the processor's resize and center crop both act."""
    rng = np.random.default_rng(0)
    return [
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for h, w in [(45, 61), (32, 32), (100, 3 * 7)]
    ]


def reference_embeddings(checkpoint: Path, dtype: torch.dtype, images: list[Image.Image]) -> np.ndarray:
    pipe = WanImageToVideoPipeline(
        tokenizer=None,
        text_encoder=None,
        vae=None,
        scheduler=None,
        image_processor=CLIPImageProcessor.from_pretrained(checkpoint / "image_processor"),
        image_encoder=CLIPVisionModel.from_pretrained(checkpoint / "image_encoder", dtype=dtype),
    )
    with torch.no_grad():
        return pipe.encode_image(images, device=torch.device("cpu")).float().numpy()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_equals_diffusers_encode_image_exactly(checkpoint: Path, images: list[Image.Image], dtype: str) -> None:
    encoder = ClipImageEncoder.from_folders(checkpoint / "image_encoder", checkpoint / "image_processor", dtype=dtype)
    ours = encoder.encode([np.asarray(image) for image in images])
    reference = reference_embeddings(checkpoint, getattr(torch, dtype), images)

    tokens = (IMAGE_SIZE // PATCH_SIZE) ** 2 + 1  # patches + class token (257 for ViT-H/14 at 224)
    assert ours.shape == (len(images), tokens, HIDDEN_SIZE) and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, reference)


def test_one_image_at_a_time_equals_the_batch(checkpoint: Path, images: list[Image.Image]) -> None:
    encoder = ClipImageEncoder.from_folders(checkpoint / "image_encoder", checkpoint / "image_processor")
    arrays = [np.asarray(image) for image in images]
    batch = encoder.encode(arrays)
    singles = np.concatenate([encoder.encode([array]) for array in arrays])

    np.testing.assert_allclose(singles, batch, rtol=0, atol=1e-5 * np.abs(batch).max())


def test_demo_writers_are_deterministic(tmp_path: Path, checkpoint: Path) -> None:
    write_demo_image_encoder(tmp_path / "image_encoder", seed=0, image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)
    write_demo_image_processor(tmp_path / "image_processor", image_size=IMAGE_SIZE)
    for name in ("image_encoder/model.safetensors", "image_encoder/config.json", "image_processor/preprocessor_config.json"):
        assert (tmp_path / name).read_bytes() == (checkpoint / name).read_bytes(), name
