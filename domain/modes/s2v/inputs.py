"""Wan 2.2 S2V's inputs: the reference image, the speech audio and an optional pose video."""

from __future__ import annotations

from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.audio import AudioKind
from wanjax.domain.inputs.fields import InputField
from wanjax.domain.s2v_spec import SPEECH_SAMPLE_RATE

REFERENCE = InputField(
    name="image", flag="--image", kind=kinds.IMAGE, http="input_reference",
    help="Wan S2V: the reference image (png/jpg), any size: its short side resized and its centre cropped to the "
         "video's size, as the official code does",
)  # fmt: skip
AUDIO = InputField(
    name="audio", flag="--audio", kind=AudioKind(SPEECH_SAMPLE_RATE), http="audio",
    help="Wan S2V: the speech (wav/mp3/flac), read at 16 kHz mono; the video runs in clips until it ends "
         "(or num_repeat clips). Text-to-speech (the official CosyVoice option) is not part of wanjax",
)  # fmt: skip
POSE_VIDEO = InputField(
    name="pose_video", flag="--pose-video", kind=kinds.WHOLE_VIDEO, http="pose_video",
    help="Wan S2V: an optional pose video driving the body (its first infer_frames * clips frames at 16 fps)",
)  # fmt: skip
INPUTS = (REFERENCE, AUDIO, POSE_VIDEO)
NAMES = {"image": REFERENCE, "audio": AUDIO, "pose_video": POSE_VIDEO}
"""The inputs by name, as refusals name them."""
