"""Loading and input errors of the torch CLIP image encoder adapter (no model weights needed
except for the input checks, which use the tiny demo encoder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wanjax.adapters.torch.clip_image import ClipImageEncoder
from wanjax.adapters.torch.demo_clip import write_demo_image_encoder, write_demo_image_processor
from wanjax.domain.errors import CheckpointError, ConfigError, InvalidRequestError


def test_missing_image_encoder_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="image encoder folder not found: .*image_encoder"):
        ClipImageEncoder.from_folders(tmp_path / "image_encoder", tmp_path / "image_processor")


def test_missing_image_processor_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "image_encoder").mkdir()
    with pytest.raises(CheckpointError, match="image processor folder not found: .*image_processor"):
        ClipImageEncoder.from_folders(tmp_path / "image_encoder", tmp_path / "image_processor")


def test_empty_image_encoder_folder_is_a_checkpoint_error(tmp_path: Path) -> None:
    (tmp_path / "image_encoder").mkdir()
    write_demo_image_processor(tmp_path / "image_processor")
    with pytest.raises(CheckpointError, match="cannot load the CLIP image encoder"):
        ClipImageEncoder.from_folders(tmp_path / "image_encoder", tmp_path / "image_processor")


def test_unknown_dtype_lists_the_allowed_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bfloat16.*float32"):
        ClipImageEncoder.from_folders(tmp_path, tmp_path, dtype="float16")


@pytest.mark.parametrize(
    "images, message",
    [
        ([], "non-empty"),
        ([np.zeros((8, 8, 3), np.float32)], r"images\[0\] must be .*float32 array of shape \(8, 8, 3\)"),
        ([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8), np.uint8)], r"images\[1\].*shape \(8, 8\)"),
        ([np.zeros((8, 8, 4), np.uint8)], r"images\[0\].*shape \(8, 8, 4\)"),
        (["image.png"], r"images\[0\].*got str"),
    ],
)
def test_bad_images_are_rejected(tmp_path: Path, images: list, message: str) -> None:
    write_demo_image_encoder(tmp_path / "image_encoder", seed=0)
    write_demo_image_processor(tmp_path / "image_processor")
    encoder = ClipImageEncoder.from_folders(tmp_path / "image_encoder", tmp_path / "image_processor")
    with pytest.raises(InvalidRequestError, match=message):
        encoder.encode(images)
