"""RGB -> YUV 4:2:0 in numpy: the colour conversion before H.264, done deterministically here.

Integer arithmetic in numpy gives the same planes on every machine, whatever FFmpeg's
converter (swscale) would choose for the CPU and its threads; x264 turns a one-level change
into a different file. (Run-to-run differences once blamed on swscale were more likely
x264's, see `X264_OPTIONS` in video_files.py: 300 swscale conversions here agree.) BT.601
coefficients, limited range (16-235 luma, 16-240 chroma): swscale's default for these sizes.
"""

from __future__ import annotations

import numpy as np

# 8-bit fixed-point BT.601 limited-range matrix (rows: Y, U, V; scale 1/256)
_MATRIX = np.array([[66, 129, 25], [-38, -74, 112], [112, -94, -18]], dtype=np.int32)
_OFFSET = np.array([16, 128, 128], dtype=np.int32)


def rgb_to_yuv420p(frame: np.ndarray) -> np.ndarray:
    """[H, W, 3] uint8 RGB (H, W even) -> [H * 3 / 2, W] uint8: the Y plane, then U, then V."""
    height, width, _ = frame.shape
    yuv = (frame.astype(np.int32) @ _MATRIX.T + 128) >> 8  # [H, W, 3], rounded
    yuv += _OFFSET
    luma = yuv[..., 0]
    chroma = yuv[..., 1:].reshape(height // 2, 2, width // 2, 2, 2).sum(axis=(1, 3))  # [H/2, W/2, 2]
    chroma = (chroma + 2) >> 2  # the rounded mean of each 2x2 block
    planes = [luma.reshape(-1), chroma[..., 0].reshape(-1), chroma[..., 1].reshape(-1)]
    return np.clip(np.concatenate(planes), 0, 255).astype(np.uint8).reshape(height * 3 // 2, width)
