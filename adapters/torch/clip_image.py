"""The `ImageEncoder` port on transformers' CLIP vision model, numerically equal to diffusers'
`WanImageToVideoPipeline.encode_image`.

Wan 2.1 I2V conditions its cross-attention on CLIP ViT-H/14's penultimate hidden state
(before the last block and the post-layernorm), 257 tokens of width 1280 per image.
Images go through the checkpoint's own `CLIPImageProcessor` as PIL images, the input
diffusers' pipeline receives, so resizing and cropping are those of the reference.
This is the only module that imports torch for image encoding; the composition root
imports it lazily so JAX-only runs never load torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import CLIPImageProcessor, CLIPVisionModel

from wanjax.domain.errors import CheckpointError, ConfigError, InvalidRequestError

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
"""Weight and compute dtypes of the encoder (diffusers' Wan I2V example runs it in float32)."""


class ClipImageEncoder:
    """Encodes a batch of RGB images in one forward pass -> [B, M, D] float32."""

    def __init__(self, processor: CLIPImageProcessor, model: CLIPVisionModel) -> None:
        self._processor = processor
        self._model = model.eval()

    @classmethod
    def from_folders(
        cls,
        image_encoder_dir: Path,
        image_processor_dir: Path,
        *,
        dtype: str = "float32",
        device: str = "cpu",
    ) -> ClipImageEncoder:
        """Loads a diffusers-format `image_encoder/` and `image_processor/` pair, offline.

        `dtype` is "float32" or "bfloat16"; `device` is a torch device name such as "cpu".
        """
        if dtype not in TORCH_DTYPES:
            raise ConfigError(
                f"image encoder dtype {dtype!r} is not supported; use one of {sorted(TORCH_DTYPES)}"
            )
        _require_folder(Path(image_encoder_dir), "image encoder")
        _require_folder(Path(image_processor_dir), "image processor")
        try:
            processor = CLIPImageProcessor.from_pretrained(image_processor_dir, local_files_only=True)
        except (OSError, ValueError) as error:
            raise CheckpointError(
                f"cannot load the CLIP image processor from {image_processor_dir}: {error}"
            ) from error
        try:
            model = CLIPVisionModel.from_pretrained(
                image_encoder_dir, dtype=TORCH_DTYPES[dtype], local_files_only=True
            )
        except (OSError, ValueError) as error:
            raise CheckpointError(
                f"cannot load the CLIP image encoder from {image_encoder_dir}: {error}"
            ) from error
        return cls(processor, model.to(torch.device(device)))

    def encode(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Images [H, W, 3] uint8 -> the penultimate hidden state [B, M, D] float32."""
        if len(images) == 0:
            raise InvalidRequestError("images must be a non-empty sequence of [H, W, 3] uint8 arrays")
        pictures = [Image.fromarray(_checked_image(i, image)) for i, image in enumerate(images)]
        pixels = self._processor(images=pictures, return_tensors="pt").pixel_values  # [B, 3, S, S]
        with torch.inference_mode():
            hidden = self._model(pixel_values=pixels.to(self._model.device), output_hidden_states=True)
            return hidden.hidden_states[-2].float().cpu().numpy()  # [B, M, D]


def _checked_image(index: int, image: np.ndarray) -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        described = (
            f"{image.dtype} array of shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        )
        raise InvalidRequestError(f"images[{index}] must be an RGB [H, W, 3] uint8 array, got {described}")
    return image


def _require_folder(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise CheckpointError(
            f"{what} folder not found: {folder}. A diffusers-format Wan 2.1 image-to-video "
            "checkpoint holds image_encoder/ and image_processor/ beside transformer/ and vae/; "
            "point the model path at that checkpoint root (e.g. a download of "
            "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers)."
        )
