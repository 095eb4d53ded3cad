"""What differs between two mp4 files that should be the same bytes: their frames decoded and
compared, for a failing assertion's message (a byte diff of two mp4s says nothing of the video)."""

import io

import av
import numpy as np


def video_difference(a: bytes, b: bytes) -> str:
    """'' when `a == b`; else the frame counts, or each differing frame's largest level difference."""
    if a == b:
        return ""
    frames = [_decoded(data) for data in (a, b)]
    if frames[0].shape != frames[1].shape:
        return f"the videos differ: frames {frames[0].shape} against {frames[1].shape}"
    levels = np.abs(frames[0].astype(np.int16) - frames[1].astype(np.int16)).reshape(len(frames[0]), -1).max(axis=1)
    changed = {i: int(level) for i, level in enumerate(levels) if level}
    return f"the videos differ ({len(a)} and {len(b)} bytes); largest level difference of each differing frame: {changed}"


def _decoded(data: bytes) -> np.ndarray:
    with av.open(io.BytesIO(data)) as container:
        return np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)])
