"""How many clips a Wan S2V run makes and how many frames it emits, from the speech's length alone
(before any model runs: the memory plan, progress, the CLI's checks), as `WanS2V.generate` counts
them: the wav2vec2 hidden states (50 a second: the release's conv stack), resampled to 30 a second,
give int(T30 / (infer_frames * 30 / fps)) + 1 clips (one more than the whole clips the audio fills:
the last runs past its end), at most `num_repeat` (0: no limit). The first clip, which has no
motion tokens (`drop_first_motion`), emits 3 frames fewer than the others."""

from __future__ import annotations

WAV2VEC2_CONVS = ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2))
"""(kernel, stride) of wav2vec2's feature encoder (every wav2vec2 checkpoint's, the release's too)."""
SHORTEST_SPEECH = 720
"""The fewest 16 kHz samples wav2vec2 makes two hidden states of (one row at 30 a second): its
conv stack's 400-sample window plus one 320-sample stride (adapters/torch/wav2vec2.py refuses fewer)."""
HIDDEN_RATE, FEATURE_RATE = 50, 30
FIRST_CLIP_DROPPED = 3
"""Frames `WanS2V.generate` drops from the first clip's decode (`image[:, :, 3:]`) with drop_first_motion."""


def speech_clips(samples: int, infer_frames: int, fps: int, num_repeat: int = 0) -> int:
    """The clips of `infer_frames` frames that `samples` samples of 16 kHz speech make."""
    hidden = samples
    for kernel, stride in WAV2VEC2_CONVS:
        hidden = max(0, (hidden - kernel) // stride + 1)
    features = int(hidden / HIDDEN_RATE * FEATURE_RATE)
    clips = int(features / (infer_frames * FEATURE_RATE / fps)) + 1
    return clips if num_repeat == 0 else min(clips, num_repeat)


def emitted_frames(clips: int, infer_frames: int) -> int:
    """The frames of a video of `clips` clips."""
    return clips * infer_frames - FIRST_CLIP_DROPPED
