"""Reading a Wan Animate request's driving videos (already extracted pose and face videos, and for
replacement a background video and a mask video) into `AnimateVideos`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanjax.adapters.media.vace_inputs import read_frames
from wanjax.adapters.media.video_input import read_whole_video
from wanjax.domain.animate import AnimateVideos
from wanjax.domain.requests import MAX_FRAMES


def read_animate_videos(
    pose: Path, face: Path, background: Path | None, mask: Path | None, *, height: int, width: int
) -> AnimateVideos:
    """The videos at these paths (mp4 or frame folders); the mask video's first channel, white where
    the character is, scaled to [0, 1] at the video's size."""
    pose_frames = read_whole_video(pose, MAX_FRAMES)
    character = None
    if mask is not None:
        character = read_frames(mask, len(read_whole_video(mask, MAX_FRAMES)), height, width)[..., 0] / 255.0
    return AnimateVideos(
        pose=pose_frames,
        face=read_whole_video(face, MAX_FRAMES),
        background=None if background is None else read_whole_video(background, MAX_FRAMES),
        mask=None if character is None else character.astype(np.float32),
    )
