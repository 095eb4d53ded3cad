"""Video sinks: H.264 mp4 through PyAV, and raw uint8 frames as .npy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanjax.adapters.media.atomic import atomic_path
from wanjax.adapters.media.yuv import rgb_to_yuv420p


class Mp4Sink:
    """Writes frames [F, H, W, 3] uint8 as an H.264 mp4 (yuv420p, so H and W must be even).

    The same frames must give the same file on every machine and every run: colours are
    converted here (`rgb_to_yuv420p`) rather than by FFmpeg's threaded converter, and
    x264 runs on one thread, since its output depends on its thread count.
    """

    def __init__(self, crf: int = 18) -> None:
        self.crf = crf

    def write(self, frames: np.ndarray, path: Path, fps: int) -> None:
        import av

        frames = np.ascontiguousarray(frames)
        _, height, width, _ = frames.shape
        with atomic_path(path) as temporary:
            with av.open(str(temporary), mode="w", format="mp4") as container:
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
                stream.options = {"crf": str(self.crf), "threads": "1"}
                for frame in frames:
                    planes = rgb_to_yuv420p(frame)
                    container.mux(stream.encode(av.VideoFrame.from_ndarray(planes, format="yuv420p")))
                container.mux(stream.encode())


class NpySink:
    """Writes any array as .npy (the raw uint8 frames, or latents)."""

    def write(self, frames: np.ndarray, path: Path, fps: int = 0) -> None:
        with atomic_path(path) as temporary:
            with temporary.open("wb") as f:
                np.save(f, frames)
