"""Video sinks: H.264 mp4 through PyAV, and raw uint8 frames as .npy."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from wanjax.adapters.media.atomic import atomic_path
from wanjax.adapters.media.yuv import rgb_to_yuv420p


# x264 settings that keep "same frames, same file": one thread, since the output depends on
# the thread count; no B-frames; and cpu-independent. x264 reads memory it never initialised
# (valgrind memcheck, tests/integration/test_mp4_memcheck.py), so the file changed with whatever
# the process's heap and stack held: with B-frames and its macroblock tree on (6 uses inside
# x264_encoder_encode on a 5-frame 32x48 clip), and, without B-frames, on every video whose width
# is an odd number of 16-pixel macroblocks (16, 40, 48, 80, 112, 144 wide; 720-wide portrait 720p
# too): 2-5 uses of an uninitialised stack value, which changed one keyframe
# of one video in about one in five runs of tests/integration/test_replicas.py. cpu-independent=1
# (x264's own switch for the same output on every CPU, which avoids its CPU-specific code paths):
# none left at any of those widths. Costs measured on a noisy 81-frame 832x480 clip: B-frames off none (127.7 kB
# against 127.8 kB with them on a 17-frame clip), cpu-independent +0.09% bytes and no time.
X264_OPTIONS = {"threads": "1", "x264-params": "bframes=0:cpu-independent=1"}
# Every mp4 is a fragmented one, which plays while it is written (a job's partial content; the CLI's
# and a job's files are the same bytes): the index (an empty moov) first, then a fragment (moof +
# mdat) per frame, about 100 bytes each, each on disk once the next frame's packet comes (x264's
# lookahead holds back about 40 frames until the end: a 60-frame start plays its first 18).
FRAGMENTED = {"movflags": "empty_moov+frag_every_frame+default_base_moof", "flush_packets": "1"}


class Mp4Sink:
    """Writes frames [F, H, W, 3] uint8 as an H.264 mp4 (yuv420p, so H and W must be even), fragmented
    (`FRAGMENTED`).

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
        with self.writer(path, fps) as writer:
            writer.append(frames)

    def writer(self, path: Path, fps: int) -> Mp4Writer:
        """An mp4 at `path` itself written as its frames come (`Mp4Writer`)."""
        return Mp4Writer(path, fps, self.crf)


class Mp4Writer:
    """An mp4 written as its frames come: `append(frames [f, H, W, 3] uint8)` encodes them at once (the
    file is opened at the first), `close()` (or the end of a `with`) flushes the encoder and finishes
    the file. The same frames give the same file whatever parts they come in."""

    def __init__(self, path: Path, fps: int, crf: int) -> None:
        self.path, self.fps, self.crf = path, fps, crf
        self._container: Any = None
        self._stream: Any = None

    def append(self, frames: np.ndarray) -> None:
        import av

        frames = np.ascontiguousarray(frames)
        if self._container is None:
            _, height, width, _ = frames.shape
            self.path.touch()  # there from the first frames on: FFmpeg opens it at its first packet
            self._container = av.open(str(self.path), mode="w", format="mp4", options=FRAGMENTED)
            self._stream = self._container.add_stream("libx264", rate=self.fps)
            self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
            self._stream.options = {"crf": str(self.crf), **X264_OPTIONS}
        for frame in frames:
            planes = rgb_to_yuv420p(frame)
            self._container.mux(self._stream.encode(av.VideoFrame.from_ndarray(planes, format="yuv420p")))

    def close(self) -> None:
        if self._container is None:
            return
        container, self._container = self._container, None
        with container:
            container.mux(self._stream.encode())

    def abandon(self) -> None:
        """Closes the file without finishing the video (the write failed or was stopped)."""
        if self._container is not None:
            container, self._container = self._container, None
            with suppress(Exception):
                container.close()

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon()


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


def whole_fragments(data: bytes) -> bytes | None:
    """The leading whole top-level boxes of a fragmented mp4 being written, up to the end of its last
    whole fragment's media (`mdat`): a playable file of the frames so far; None before the first."""
    end, offset = None, 0
    while offset + 8 <= len(data):
        size, kind = int.from_bytes(data[offset : offset + 4], "big"), data[offset + 4 : offset + 8]
        if size == 1 and offset + 16 <= len(data):  # a 64-bit size follows the type
            size = int.from_bytes(data[offset + 8 : offset + 16], "big")
        if size < 8 or offset + size > len(data):
            break
        offset += size
        if kind == b"mdat":
            end = offset
    return None if end is None else data[:end]
