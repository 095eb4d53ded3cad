"""Wan 2.2 Animate as a generation mode: a character image (`image`) driven by a pose video and a
face video (animation), or put into a background video where a mask says (replacement), run
segment by segment as diffusers' WanAnimatePipeline does.

The character (any size) goes onto a black canvas of the video's size, and CLIP sees it, as the
run's reference does (`sigma_schedule`: the official code by default, diffusers with
`sigma_schedule=diffusers`; adapters/media/letterbox.py): the official code letterboxes with
OpenCV's linear resize and shows CLIP that canvas squashed to its square, diffusers letterboxes
with Lanczos and shows CLIP the image as given.

Every segment is one denoising run over latents [1, 1 + F', H', W', C]: latent frame 0 is the
reference (character) frame, frames 1..F' the segment's L pixel frames. Their extra channels
hold, per latent frame, a 4-slot mask and the VAE latents of a conditioning video: the
character for frame 0 (mask all 1), and for the segment the previous segment's last P
generated frames (mask 1 over them; none for the first segment), then black ("animate") or the
background video ("replace": the mask is 1 outside the character's region too). The pose
video's latents and the face video (stretched to the model's face size, as diffusers resizes it)
go to the transformer as the Animate extension's inputs (`Conditioning.extensions["animate"]`).
The loop is the shared one (domain/modes/segments.py): each segment is decoded, its last P
frames, unrounded, condition the next, and its new frames are emitted; segment k starts from the
noise of seed + k (segment 0: the run's noise).

The latents, the decoded frames and the conditioning made of them stay where the adapters made
them (the device), combined there through `array_namespace`; only each segment's new frames,
rounded to uint8, come to the host. The driving videos are held as given; each segment pads and
converts its own frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.animate import ANIMATE_EXTENSION
from wanjax.domain.inputs.fields import InputRefusal
from wanjax.domain.modes.animate.inputs import INPUTS, NAMES
from wanjax.domain.modes.animate.options import AnimateOptions
from wanjax.domain.modes.animate.videos import AnimateVideos, animate_segments, nearest_resized, segment_mask
from wanjax.domain.modes.base import (
    GenerationMode,
    Generated,
    ModelTraits,
    ModeRun,
    ReceivedShapes,
    array_namespace,
    unit_pixels,
)
from wanjax.domain.modes.segments import Segments, Window, generate_in_segments, window_of

if TYPE_CHECKING:
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.requests import GenerationRequest



class Animate(GenerationMode):
    name = "animate"
    inputs = INPUTS
    options = AnimateOptions
    selected_by = ("pose_video", "face_video", "background_video")

    def default_on(self, model: ModelTraits) -> bool:
        return model.transformer.is_animate

    def check_model(self, model: ModelTraits) -> None:
        if not model.transformer.is_animate:
            raise InputRefusal(
                "{pose_video}, {face_video}, {background_video} and {mask} (with {pose_video}) drive a Wan 2.2 "
                "Animate model; this model has no Animate blocks and does not take them: use one (e.g. --model "
                "wan2.2-animate-14b) or drop them", **NAMES,
            )

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        if request.input("face_video") is None:
            raise self.needs_its_inputs()

    def needs_its_inputs(self) -> InputRefusal:
        """The refusal of a request on an Animate model without Animate's inputs."""
        return InputRefusal(
            "this is a Wan 2.2 Animate model: give the character ({image}) with {pose_video} and {face_video}", **NAMES
        )

    def check_request(self, request: GenerationRequest) -> None:
        if any(request.input(name) is None for name in ("image", "pose_video", "face_video")):
            raise InputRefusal(
                "Wan Animate needs the character ({image}) with its pose and face videos ({pose_video}, {face_video})",
                **NAMES,
            )
        self.segments(animate_videos(request).pose, request)
        animate_videos(request).check_size(request.height, request.width)

    def segments(self, pose: np.ndarray, request: GenerationRequest) -> Segments:
        """How the pose video splits into the request's segments."""
        options = self.options_of(request)
        return animate_segments(len(pose), options.segment_frame_length, options.prev_segment_conditioning_frames)

    def geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        """One segment's latents: the reference frame, then the segment's latent frames."""
        frames = (self.options_of(request).segment_frame_length - 1) // 4 + 1  # the Wan 2.1 VAE's temporal compression
        return attrs.evolve(geometry, frames=1 + frames)

    def encoded_frames(self, request: GenerationRequest) -> int:
        return self.options_of(request).segment_frame_length

    def output_frames(self, request: GenerationRequest) -> int:
        return len(request.input("pose_video"))

    def segment_frames(self, request: GenerationRequest) -> int:
        return self.options_of(request).segment_frame_length

    def segment_count(self, request: GenerationRequest) -> int:
        return self.segments(request.input("pose_video"), request).count

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        """The bench's step: the latents' grid is one segment's, the reference frame first."""
        t, (frames, height, width) = shapes.transformer, shapes.latent_grid
        size = t.animate.motion_encoder_size
        return Conditioning(
            extra_channels=(1, frames, height, width, t.in_channels - t.out_channels),
            image_context=(1, shapes.image_tokens, t.image_dim),
            extensions=ANIMATE_EXTENSION.given(
                pose=(1, frames - 1, height, width, t.out_channels), face=(1, 4 * (frames - 1) - 3, size, size, 3)
            ),
        )

    def generate(self, run: ModeRun) -> Generated:
        request, parts = run.request, run.parts
        if len(run.requests) > 1:
            raise InvalidRequestError("Wan Animate runs one video at a time: send the requests one by one")
        given = animate_videos(request)
        segments = self.segments(given.pose, request)
        temporal = run.model.vae.temporal_compression
        with run.span("conditioning"):
            face_size = run.model.transformer.animate.motion_encoder_size
            given = attrs.evolve(given, face=run.stretch(given.face, face_size, face_size))  # as diffusers resizes it
            size = (request.height, request.width)
            canvas = run.letterbox(request.input("image"), *size, request.sigma_schedule)  # as the run's reference does
            encoded = parts.autoencoder.encode_image(canvas, *size, num_frames=1)
            xp = array_namespace(encoded)  # the latents and frames stay where the adapters made them
            ones = np.ones((*encoded.shape[:-1], temporal), np.float32)
            reference = xp.concat([xp.asarray(ones), encoded], axis=-1)  # [1, 1, H', W', temporal + C]
            image_context = _character_context(parts.image_encoder, request.input("image"), canvas, request.sigma_schedule)

        def conditioning(window: Window, previous: Any) -> Conditioning:
            videos = _Videos.of(given, window, run.geometry)
            channels = _segment_channels(parts.autoencoder, videos, previous, window.given, temporal)
            return Conditioning(
                extra_channels=xp.concat([reference, channels], axis=1), image_context=image_context,
                extensions=ANIMATE_EXTENSION.given(
                    pose=parts.autoencoder.encode_video(videos.pose[None]), face=videos.face[None]
                ),
            )  # fmt: skip

        return generate_in_segments(run, segments, conditioning, video_latents=lambda latents: latents[:, 1:])


@attrs.frozen
class _Videos:
    """One segment's driving frames, padded where the segments run past the videos: pose and
    background [L, H, W, 3] and face [L, S, S, 3] in [-1, 1], the character mask [L, H', W'] at
    latent size."""

    pose: np.ndarray
    face: np.ndarray
    background: np.ndarray | None
    character: np.ndarray | None

    @classmethod
    def of(cls, videos: AnimateVideos, window: Window, geometry: LatentGeometry) -> _Videos:
        background = None if videos.background is None else unit_pixels(window_of(videos.background, window))
        character = None
        if videos.mask is not None:
            character = nearest_resized(window_of(videos.mask, window), geometry.height, geometry.width)
        pose, face = (unit_pixels(window_of(v, window)) for v in (videos.pose, videos.face))
        return cls(pose, face, background, character)


def _character_context(encoder: Any, image: np.ndarray, canvas: np.ndarray, reference: str) -> Any:
    """CLIP's view of the character as `reference` gives it: the official code squashes its canvas to
    CLIP's square, diffusers hands CLIP the image as given (resized by its short side, cropped)."""
    if reference == "official":
        return encoder.encode([canvas], squash=True)
    return encoder.encode([image])


def animate_videos(request: GenerationRequest) -> AnimateVideos:
    """The request's driving videos (its mask as [F, H, W] in [0, 1])."""
    mask = request.input("mask")
    return AnimateVideos(
        pose=request.input("pose_video"), face=request.input("face_video"),
        background=request.input("background_video"), mask=None if mask is None else (mask / 255.0).astype(np.float32),
    )  # fmt: skip


def _segment_channels(autoencoder: Any, videos: _Videos, previous: Any, given: int, temporal: int) -> Any:
    """[1, F', H', W', temporal + C]: the segment's mask, then its conditioning video's latents: the
    background (or black) with the previous segment's last `given` frames (`previous`, on the
    device where it was decoded) over its first."""
    length = len(videos.pose)
    if videos.background is not None:
        video = videos.background[None]
    else:
        video = np.zeros((1, length, *videos.pose.shape[1:]), np.float32)
    if previous is not None:
        xp = array_namespace(previous)
        video = xp.concat([previous, xp.asarray(video[:, given:])], axis=1)
    latents = autoencoder.encode_video(video)
    mask = segment_mask(length, *latents.shape[2:4], temporal, given, videos.character)
    xp = array_namespace(latents)
    return xp.concat([xp.asarray(mask[None]), latents], axis=-1)


ANIMATE = Animate()
