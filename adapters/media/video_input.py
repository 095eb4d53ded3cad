"""Source videos for video-to-video: an mp4 (any container PyAV reads) or a folder of frames."""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

import numpy as np

from wanjax.adapters.media.images import read_image
from wanjax.domain.errors import InvalidRequestError

FRAME_SUFFIXES = (".png", ".jpg", ".jpeg")


def read_video(path: Path, num_frames: int) -> np.ndarray:
    """The first `num_frames` frames of the video file or frame folder at `path`, RGB uint8
    [F, H, W, 3]; a folder's png/jpg files are its frames in name order. A missing or unreadable
    source, or one with fewer frames, is an InvalidRequestError naming it."""
    path = Path(path)
    what = f"video {path}"
    if path.is_dir():
        frames = _folder_frames(path, num_frames, what)
    elif not path.exists():
        raise InvalidRequestError(f"{what} does not exist")
    else:
        frames = _decoded_frames(str(path), num_frames, what)
    return _stacked(frames, num_frames, what)


def decode_video(data: bytes, num_frames: int, what: str) -> np.ndarray:
    """`read_video` of a video file's bytes (`what` names them in errors, e.g. the request field)."""
    return _stacked(_decoded_frames(io.BytesIO(data), num_frames, what), num_frames, what)


def _folder_frames(folder: Path, num_frames: int, what: str) -> list[np.ndarray]:
    files = sorted(f for f in folder.iterdir() if f.suffix.lower() in FRAME_SUFFIXES)
    if not files:
        raise InvalidRequestError(f"{what} is a folder without png/jpg frames; give an mp4 or a folder of frames")
    return [read_image(f) for f in files[:num_frames]]


def _decoded_frames(source: str | BinaryIO, num_frames: int, what: str) -> list[np.ndarray]:
    import av

    frames: list[np.ndarray] = []
    try:
        with av.open(source) as container:
            if not container.streams.video:
                raise InvalidRequestError(f"{what} holds no video stream")
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
                if len(frames) == num_frames:
                    break
    except (av.FFmpegError, OSError, ValueError) as err:
        raise InvalidRequestError(f"{what} is not a readable video file ({err})") from None
    return frames


def _stacked(frames: list[np.ndarray], num_frames: int, what: str) -> np.ndarray:
    if len(frames) < num_frames:
        raise InvalidRequestError(
            f"{what} has {len(frames)} frame(s); num_frames={num_frames} needs at least that many "
            "(give a longer video or lower --num-frames, 4k+1)"
        )
    shapes = {frame.shape for frame in frames}
    if len(shapes) > 1:
        raise InvalidRequestError(f"{what}: its frames differ in size ({', '.join(map(str, sorted(shapes)))})")
    return np.stack(frames)
