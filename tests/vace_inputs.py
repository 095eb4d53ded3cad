"""Control video, mask and reference images for the VACE parity tests, in the three modes the
issue names, and as diffusers' WanVACEPipeline takes them (PIL images)."""

from __future__ import annotations

import numpy as np
import PIL.Image

FRAMES, HEIGHT, WIDTH = 9, 32, 48
MODES = ["video", "video-mask", "video-mask-references"]


def inputs(mode: str) -> tuple[np.ndarray, np.ndarray | None, list[np.ndarray]]:
    """uint8 video [F, H, W, 3], mask [F, H, W] (0 or 255) and reference images [H, W, 3]."""
    rng = np.random.default_rng(5)
    video = rng.integers(0, 256, (FRAMES, HEIGHT, WIDTH, 3), dtype=np.uint8)
    mask = np.zeros((FRAMES, HEIGHT, WIDTH), np.uint8)
    mask[:, 8:24, 16:40] = 255  # regenerate a box, keep the rest
    mask[0] = 0  # keep the first frame whole
    references = [rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8) for _ in range(2)]
    return {
        "video": (video, None, []),
        "video-mask": (video, mask, []),
        "video-mask-references": (video, mask, references),
    }[mode]


def to_pil(
    video: np.ndarray, mask: np.ndarray | None, references: list[np.ndarray]
) -> tuple[list[PIL.Image.Image], list[PIL.Image.Image] | None, list[PIL.Image.Image] | None]:
    """diffusers' video, mask and reference_images arguments."""
    frames = [PIL.Image.fromarray(f, "RGB") for f in video]
    masks = None if mask is None else [PIL.Image.fromarray(f, "L") for f in mask]
    return frames, masks, [PIL.Image.fromarray(r) for r in references] or None


def unit(pixels: np.ndarray) -> np.ndarray:
    """uint8 [0, 255] -> float32 [-1, 1], as diffusers' image processor normalises."""
    return pixels.astype(np.float32) / 255 * 2 - 1
