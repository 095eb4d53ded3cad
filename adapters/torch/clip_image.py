"""The `ImageEncoder` port on transformers' CLIP vision model, numerically equal to diffusers'
`WanImageToVideoPipeline.encode_image`.

Wan 2.1 I2V conditions its cross-attention on CLIP ViT-H/14's penultimate hidden state
(before the last block and the post-layernorm), 257 tokens of width 1280 per image.
Images go through the checkpoint's own `CLIPImageProcessor` as PIL images, the input
diffusers' pipeline receives, so resizing and cropping are those of the reference; or, with
`squash` (the official Wan Animate's view of its character canvas), resized whole to the model's
square by torch's bicubic, as `wan/modules/animate/clip.py`'s `CLIPModel.visual` does.
This is the only module that imports torch for image encoding; the composition root
imports it lazily so JAX-only runs never load torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.original_clip import clip_vision_config, clip_vision_tensors
from wanjax.adapters.checkpoints.weights import open_weights
from wanjax.adapters.torch.pretrained import load_pretrained, model_from_tensors, require_folders, torch_dtype
from wanjax.domain.errors import InvalidRequestError

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def wan_clip_preprocessing(image_size: int) -> dict[str, object]:
    """The `CLIPImageProcessor` settings the Wan I2V diffusers checkpoints ship (bicubic resize of
    the short side, center crop, rescale, OpenAI CLIP mean/std), at `image_size` pixels."""
    return {
        "crop_size": {"height": image_size, "width": image_size},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_processor_type": "CLIPImageProcessor",
        "image_std": list(OPENAI_CLIP_STD),
        "resample": 3,  # PIL bicubic
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": image_size},
    }

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
        weights_dtype = torch_dtype(dtype, "image encoder")
        require_folders({"CLIP image encoder": image_encoder_dir, "CLIP image processor": image_processor_dir})
        processor = load_pretrained(CLIPImageProcessor.from_pretrained, image_processor_dir, "CLIP image processor")
        model = load_pretrained(CLIPVisionModel.from_pretrained, image_encoder_dir, "CLIP image encoder", dtype=weights_dtype)
        return cls(processor, model.to(torch.device(device)))

    @classmethod
    def from_files(cls, files: EncoderFiles, *, dtype: str = "float32", device: str = "cpu") -> ClipImageEncoder:
        """Loads the encoder from `files`: a diffusers-format `image_encoder/` folder, or one weights
        file (Wan 2.1 I2V's open-clip `.pth`, or a `.safetensors` in its or transformers' names)
        whose architecture is read from its shapes. The preprocessing is the `image_processor/`
        folder where given, else Wan's CLIP preprocessing at the model's image size."""
        weights_dtype, what = torch_dtype(dtype, "image encoder"), "CLIP image encoder"
        if files.weights.is_dir():
            model = load_pretrained(CLIPVisionModel.from_pretrained, files.weights, what, dtype=weights_dtype)
        else:
            where = str(files.weights)
            tensors = clip_vision_tensors(open_weights(files.weights), where)
            config = CLIPVisionConfig(**clip_vision_config(tensors, where))
            model = model_from_tensors(CLIPVisionModel, config, tensors, what, files.weights, weights_dtype)
        if files.preprocessing is None:
            processor = CLIPImageProcessor(**wan_clip_preprocessing(model.config.image_size))
        else:
            processor = load_pretrained(CLIPImageProcessor.from_pretrained, files.preprocessing, "CLIP image processor")
        return cls(processor, model.to(torch.device(device)))

    def encode(self, images: Sequence[np.ndarray], *, squash: bool = False) -> np.ndarray:
        """Images [H, W, 3] uint8 -> the penultimate hidden state [B, M, D] float32, each image seen
        as `pixel_values` shows it."""
        pixels = self.pixel_values(images, squash=squash)
        with torch.inference_mode():
            hidden = self._model(pixel_values=pixels.to(self._model.device), output_hidden_states=True)
            return hidden.hidden_states[-2].float().cpu().numpy()  # [B, M, D]

    def pixel_values(self, images: Sequence[np.ndarray], *, squash: bool = False) -> torch.Tensor:
        """Images [H, W, 3] uint8 -> the model's input [B, 3, S, S] float32: through the image
        processor (diffusers' pipelines' view: the short side resized, bicubic, the centre cropped)
        or, with `squash`, as the official `WanAnimate.generate` shows CLIP its canvas: the image's
        values in [-1, 1] resized to S x S by torch's bicubic (aspect not kept, nothing cropped),
        back to [0, 1] and normalised with the processor's mean and std. The official code casts
        those values to bfloat16 first; here they stay float32."""
        if len(images) == 0:
            raise InvalidRequestError("images must be a non-empty sequence of [H, W, 3] uint8 arrays")
        images = [_checked_image(i, image) for i, image in enumerate(images)]
        if not squash:
            pictures = [Image.fromarray(image) for image in images]
            return self._processor(images=pictures, return_tensors="pt").pixel_values
        size = (self._model.config.image_size,) * 2
        unit = [torch.from_numpy(image / 127.5 - 1.0).float().permute(2, 0, 1)[None] for image in images]
        squashed = torch.cat([F.interpolate(pixels, size=size, mode="bicubic", align_corners=False) for pixels in unit])
        mean, std = (torch.tensor(values, dtype=torch.float32).view(3, 1, 1) for values in (
            self._processor.image_mean, self._processor.image_std))  # fmt: skip
        return (squashed * 0.5 + 0.5 - mean) / std


def _checked_image(index: int, image: np.ndarray) -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        described = (
            f"{image.dtype} array of shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        )
        raise InvalidRequestError(f"images[{index}] must be an RGB [H, W, 3] uint8 array, got {described}")
    return image

