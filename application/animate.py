"""Wan 2.2 Animate generation, segment by segment, as diffusers' WanAnimatePipeline runs it.

Every segment is one denoising run over latents [1, 1 + F', H', W', C]: latent frame 0 is the
reference (character) frame, frames 1..F' the segment's L pixel frames. Their extra channels
hold, per latent frame, a 4-slot mask and the VAE latents of a conditioning video: the
character image for frame 0 (mask all 1), and for the segment the previous segment's last P
generated frames (mask 1 over them; zeros for the first segment), then black ("animate") or
the background video ("replace", the mask 1 outside the character's region too). The pose
video's latents and the face video go in as `Conditioning.pose` and `.face`. Each segment is
decoded, its last P frames (unrounded) condition the next, and the new frames are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from wanjax.adapters.media.images import fit_image, letterboxed_image
from wanjax.domain.animate import AnimateVideos, nearest_resized, reflect_padded, segment_mask
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import Denoiser, ImageEncoder, StepCallback, VideoAutoencoder
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace


def animate_geometry(request: GenerationRequest, transformer: TransformerSpec, vae: VaeSpec) -> LatentGeometry:
    """One segment's latents: the reference frame and the segment's latent frames. Raises before
    any load where Animate inputs meet a model without Animate blocks, or the reverse."""
    geometry = LatentGeometry.of(request, transformer, vae)
    if transformer.is_animate != (request.animate is not None):
        if transformer.is_animate:
            raise InvalidRequestError(
                "this is a Wan 2.2 Animate model: give the character (--image) with --pose-video and --face-video"
            )
        raise InvalidRequestError(
            "--pose-video, --face-video, --background-video and --mask drive a Wan 2.2 Animate model; this model "
            "has no Animate blocks: use one (e.g. --model wan2.2-animate-14b) or drop them"
        )
    if request.animate is None:
        return geometry
    length = request.segment_frame_length
    return attrs.evolve(geometry, frames=1 + (length - 1) // vae.temporal_compression + 1)


@attrs.frozen
class AnimateParts:
    """The loaded components an Animate run uses."""

    denoiser: Denoiser
    autoencoder: VideoAutoencoder
    image_encoder: ImageEncoder


@attrs.frozen
class PreparedVideos:
    """The driving videos padded to the segments' frames and fitted: pose and background
    [N', H, W, 3] and face [N', S, S, 3] in [-1, 1]; the character mask [N', H', W'] at latent size."""

    pose: np.ndarray
    face: np.ndarray
    background: np.ndarray | None
    character: np.ndarray | None

    @classmethod
    def of(
        cls, videos: AnimateVideos, count: int, size: tuple[int, int], face_size: int, latent_hw: tuple[int, int]
    ) -> PreparedVideos:
        """`videos` padded to `count` frames, fitted to `size` (H, W), the faces to face_size squared."""
        height, width = size

        def fitted(frames: np.ndarray, h: int, w: int) -> np.ndarray:
            return np.stack([fit_image(frame, h, w) for frame in reflect_padded(frames, count)])

        background = None if videos.background is None else fitted(videos.background, height, width)
        character = None
        if videos.mask is not None:
            character = nearest_resized(reflect_padded(videos.mask, count).astype(np.float32), *latent_hw)
        return cls(fitted(videos.pose, height, width), fitted(videos.face, face_size, face_size), background, character)


def generate_animation(
    parts: AnimateParts,
    request: GenerationRequest,
    transformer: TransformerSpec,
    vae: VaeSpec,
    geometry: LatentGeometry,
    plans: tuple[SamplingPlan, SamplingPlan],
    prompts: tuple[Any, Any],
    noise: Sequence[Any],
    *,
    on_step: StepCallback | None = None,
    trace: TimingTrace,
) -> tuple[np.ndarray, np.ndarray]:
    """Frames [1, N, H, W, 3] uint8 (N: the pose video's frames) and every segment's final latents
    [K, 1 + F', H', W', C], from one noise array [1, 1 + F', H', W', C] per segment. `plans` are
    the run's plan and the one to compile for; `prompts` the context and negative context."""
    videos, segments = request.animate, request.animate_segments
    temporal, h, w = vae.temporal_compression, geometry.height, geometry.width
    height, width, length, given = request.height, request.width, segments.length, segments.overlap
    with trace.span("conditioning"):
        inputs = PreparedVideos.of(
            videos, segments.padded_frames, (height, width), transformer.animate.motion_encoder_size, (h, w)
        )
        reference = parts.autoencoder.encode_video(letterboxed_image(request.image, height, width)[None, None])
        reference = np.concatenate([np.ones((1, 1, h, w, temporal), np.float32), np.asarray(reference)], axis=-1)
        image_context = parts.image_encoder.encode([request.image])
    plan, full_plan = plans
    context, negative_context = prompts
    kept, latents_out, previous = [], [], None
    for k, start in enumerate(segments.starts()):
        window = slice(start, start + length)
        with trace.span("conditioning"):
            pose = parts.autoencoder.encode_video(inputs.pose[window][None])
            conditioning = Conditioning(
                extra_channels=np.concatenate([reference, _segment_channels(parts, inputs, window, previous, given, k, temporal)], axis=1),
                image_context=image_context,
                pose=np.asarray(pose),
                face=inputs.face[window][None],
            )
        if k == 0:
            with trace.span("compile"):
                parts.denoiser.prepare(noise[0], full_plan, context, negative_context, conditioning)
        with trace.span("denoise"):
            latents = parts.denoiser.denoise(noise[k], plan, context, negative_context, on_step, conditioning).latents
        with trace.span("vae_decode"):
            unit = np.asarray(parts.autoencoder.decode_to_unit(latents[:, 1:]))  # [1, L, H, W, 3]
        previous = unit[:, -given:] * 2.0 - 1.0
        kept.append(unit if k == 0 else unit[:, given:])
        latents_out.append(np.asarray(latents)[0])
    frames = np.concatenate(kept, axis=1)[:, : len(videos.pose)]
    return np.round(frames * 255.0).astype(np.uint8), np.stack(latents_out)


def _segment_channels(
    parts: AnimateParts,
    inputs: PreparedVideos,
    window: slice,
    previous: np.ndarray | None,
    given: int,
    index: int,
    temporal: int,
) -> np.ndarray:
    """[1, F', H', W', temporal + C]: the segment's mask, then its conditioning video's latents."""
    length = window.stop - window.start
    if inputs.background is not None:
        video = inputs.background[window][None].copy()
    else:
        video = np.zeros((1, length, *inputs.pose.shape[1:]), np.float32)
    if previous is not None:
        video[:, :given] = previous
    latents = np.asarray(parts.autoencoder.encode_video(video))
    character = None if inputs.character is None else inputs.character[window]
    h, w = latents.shape[2:4]
    mask = segment_mask(length, h, w, temporal, given if index > 0 else 0, character)
    return np.concatenate([mask[None], latents], axis=-1)

