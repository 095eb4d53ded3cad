"""Random inputs of a Wan Animate run, as uint8 arrays: the character, its pose, face and
background videos, and a binary mask (0 or 255)."""

from __future__ import annotations

import numpy as np


def random_animate_videos(frames: int, height: int, width: int, face: tuple[int, int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    pixels = lambda *shape: rng.integers(0, 256, shape, dtype=np.uint8)  # noqa: E731
    return dict(
        image=pixels(height, width, 3), pose=pixels(frames, height, width, 3), face=pixels(frames, *face, 3),
        background=pixels(frames, height, width, 3),
        mask=(rng.random((frames, height, width)) > 0.5).astype(np.uint8) * 255,
    )  # fmt: skip
