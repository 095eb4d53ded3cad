"""Wan Animate's segments (the shared layout of domain/modes/segments.py under Animate's rules,
domain/modes/animate/videos.py) and masks, as diffusers' WanAnimatePipeline lays them out: segments
overlapping by the conditioning frames, driving videos walked back and forth to whole segments, and
the kept-pixel masks."""

import numpy as np
import pytest

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.animate.videos import animate_segments, segment_mask
from wanjax.domain.modes.segments import Window, window_of


@pytest.mark.parametrize(
    "frames, length, overlap, count, padded, starts",
    [(13, 9, 1, 2, 17, [0, 8]), (9, 9, 1, 1, 9, [0]), (10, 9, 1, 2, 17, [0, 8]), (100, 77, 5, 2, 149, [0, 72])],
)
def test_segments_cover_the_pose_video(frames, length, overlap, count, padded, starts):
    segments = animate_segments(frames, length, overlap)
    assert (segments.count, segments.padded_frames, list(segments.starts())) == (count, padded, starts)
    windows = segments.windows()
    assert [(w.start, w.given) for w in windows] == [(s, overlap if s else 0) for s in starts]


def test_videos_are_walked_back_and_forth():
    walked = lambda frames, start, length: window_of(frames, Window(0, start, length, 0)).tolist()  # noqa: E731
    assert walked(np.arange(1, 6), 0, 10) == [1, 2, 3, 4, 5, 4, 3, 2, 1, 2]
    assert walked(np.arange(1, 6), 0, 3) == [1, 2, 3]
    assert walked(np.arange(1, 6), 8, 12) == [1, 2, 3, 4, 5, 4, 3, 2, 1, 2, 3, 4]  # a window past the end
    assert walked(np.array([7]), 0, 3) == [7, 7, 7]


def test_the_mask_keeps_the_given_frames_and_the_background():
    character = np.zeros((9, 2, 2), np.float32)
    character[:, 0, 0] = 1.0  # the character's pixel is made, the rest of the background kept
    mask = segment_mask(9, 2, 2, 4, 1, character)  # [F' = 3, h, w, 4]
    assert mask.shape == (3, 2, 2, 4)
    assert (mask[0] == 1).all()  # frame 0 (given) fills latent frame 0's four slots
    assert (mask[1:, 0, 0] == 0).all() and (mask[1:, 1, 1] == 1).all()
    animate = segment_mask(9, 2, 2, 4, 0)
    assert (animate == 0).all()  # the first segment of "animate": nothing given


@pytest.mark.parametrize(
    "frames, length, overlap, message",
    [(13, 9, 3, "must be one of 1, 5"), (13, 10, 1, "must be 4k \\+ 1"), (1, 9, 1, "needs more than")],
)
def test_bad_layouts_are_refused_naming_the_fix(frames, length, overlap, message):
    with pytest.raises(InvalidRequestError, match=message):
        animate_segments(frames, length, overlap)
