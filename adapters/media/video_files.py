"""Video sinks: H.264 mp4 through PyAV, and raw uint8 frames as .npy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanjax.adapters.media.atomic import atomic_path
from wanjax.adapters.media.yuv import rgb_to_yuv420p


# x264 settings that keep "same frames, same file": one thread, since the output depends on
# the thread count; and no B-frames. With B-frames and its macroblock tree on, x264 reads
# memory it never initialised (valgrind memcheck: 6 uninitialised-value uses inside
# x264_encoder_encode on a 5-frame 32x48 clip; none with bframes=0, none with mbtree=0), so
# the file changed with whatever the process's heap held: one macroblock of one B-frame, in
# about one test run in five under load. Dropping B-frames cost nothing measurable at crf 18
# (a noisy 17-frame 192x128 clip: 127.7 kB against 127.8 kB with them); mbtree=0 cost 21%.
X264_OPTIONS = {"threads": "1", "x264-params": "bframes=0"}


class Mp4Sink:
    """Writes frames [F, H, W, 3] uint8 as an H.264 mp4 (yuv420p, so H and W must be even).

    The same frames must give the same file on every machine and every run: colours are
    converted here (`rgb_to_yuv420p`, integer arithmetic) rather than by FFmpeg, and x264
    runs with `X264_OPTIONS`.
    """

    def __init__(self, crf: int = 18) -> None:
        self.crf = crf

    def write(self, frames: np.ndarray, path: Path, fps: int) -> None:
        """`encode` under a temporary name, renamed onto `path` once whole."""
        with atomic_path(path) as temporary:
            self.encode(frames, temporary, fps)

    def encode(self, frames: np.ndarray, path: Path, fps: int) -> None:
        """Writes the mp4 at `path` itself (callers that rename files together use this)."""
        import av

        frames = np.ascontiguousarray(frames)
        _, height, width, _ = frames.shape
        with av.open(str(path), mode="w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"crf": str(self.crf), **X264_OPTIONS}
            for frame in frames:
                planes = rgb_to_yuv420p(frame)
                container.mux(stream.encode(av.VideoFrame.from_ndarray(planes, format="yuv420p")))
            container.mux(stream.encode())


class NpySink:
    """Writes any array as .npy (the raw uint8 frames, or latents)."""

    def write(self, frames: np.ndarray, path: Path, fps: int = 0) -> None:
        """`encode` under a temporary name, renamed onto `path` once whole."""
        with atomic_path(path) as temporary:
            self.encode(frames, temporary, fps)

    def encode(self, frames: np.ndarray, path: Path, fps: int = 0) -> None:
        """Writes the .npy at `path` itself."""
        with path.open("wb") as f:
            np.save(f, frames)
