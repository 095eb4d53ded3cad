"""Wan 2.2 Animate's inputs: the character, its pose and face videos, and for replacement the
background video and the character's mask."""

from __future__ import annotations

from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField

CHARACTER = InputField(
    name="image", flag="--image", kind=kinds.IMAGE, http="input_reference",
    help="Wan Animate: the character (png/jpg), any size: fitted onto a black canvas of the video's size",
)  # fmt: skip
POSE_VIDEO = InputField(
    name="pose_video", flag="--pose-video", kind=kinds.WHOLE_SIZED_VIDEO, http="pose_video",
    help="Wan Animate: the rendered pose video (mp4 or frame folder); the output has its length",
)  # fmt: skip
FACE_VIDEO = InputField(
    name="face_video", flag="--face-video", kind=kinds.WHOLE_VIDEO, http="face_video",
    help="Wan Animate: the cropped face video, stretched to the model's face size (512x512 for Animate-14B) "
         "where it differs",
)  # fmt: skip
BACKGROUND_VIDEO = InputField(
    name="background_video", flag="--background-video", kind=kinds.WHOLE_SIZED_VIDEO, http="background_video",
    help="Wan Animate replacement: the video to put the character into (with --mask)",
)  # fmt: skip
CHARACTER_MASK = InputField(
    name="mask", flag="--mask", kind=kinds.WHOLE_MASK, http="mask",
    help="Wan Animate replacement: a mask video, white where the character is",
)  # fmt: skip
INPUTS = (CHARACTER, POSE_VIDEO, FACE_VIDEO, BACKGROUND_VIDEO, CHARACTER_MASK)
NAMES = {"image": CHARACTER, "pose_video": POSE_VIDEO, "face_video": FACE_VIDEO,
         "background_video": BACKGROUND_VIDEO, "mask": CHARACTER_MASK}  # fmt: skip
"""The inputs by name, as refusals name them."""
