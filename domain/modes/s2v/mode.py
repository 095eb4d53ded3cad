"""Wan 2.2 S2V (speech-to-video) as a generation mode, as the official `WanS2V.generate` runs it: a
reference image and speech (and optionally a pose video) make a video clip by clip, each clip
`infer_frames` frames continuing from the previous clips' last 73 frames (motion frames), until
the audio ends or `num_repeat` clips.

Before the clips: the speech's wav2vec2 features, one row per video frame (the speech encoder;
the last clip runs past the audio, its rows zero), the reference image fitted to the video
(`ModeRun.cover`: short side resized, centre cropped) and VAE-encoded as one latent frame, and a
buffer of 73 black motion frames. Clip r starts from the noise of seed + r (clip 0: the run's)
and is denoised with the S2V extension's inputs: its rows of the features (blank in the
unconditional row), its pose latents (zeros without a pose video), the reference latents and,
after the first clip (`drop_first_motion`), the motion latents (the buffer VAE-encoded). Its
latents are decoded behind the motion latents (the first clip: behind the reference latent), the
last `infer_frames` frames kept (the first clip: 3 fewer), emitted, and shifted into the buffer.
The loop is its own, not `segments.generate_in_segments`: S2V decodes each clip joined to the
latents ahead of it and carries a pixel buffer of motion frames rather than a window overlap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.s2v import S2V_EXTENSION
from wanjax.domain.inputs.fields import InputRefusal
from wanjax.domain.modes.base import (
    GenerationMode,
    Generated,
    ModelTraits,
    ModeRun,
    ReceivedShapes,
    array_namespace,
    unit_pixels,
)
from wanjax.domain.modes.s2v.clips import FIRST_CLIP_DROPPED, SHORTEST_SPEECH, emitted_frames, speech_clips
from wanjax.domain.modes.s2v.inputs import INPUTS, NAMES
from wanjax.domain.modes.s2v.options import S2VOptions
from wanjax.domain.modes.segments import segment_noise
from wanjax.domain.s2v_spec import (
    AUDIO_LAYERS,
    DROP_FIRST_MOTION,
    LATENT_MOTION_FRAMES,
    MOTION_FRAMES,
    SAMPLE_FPS,
)

if TYPE_CHECKING:
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.requests import GenerationRequest


class SpeechToVideo(GenerationMode):
    name = "speech-to-video"
    inputs = INPUTS
    options = S2VOptions
    selected_by = ("audio",)

    def default_on(self, model: ModelTraits) -> bool:
        return model.transformer.is_s2v

    def check_model(self, model: ModelTraits) -> None:
        if not model.transformer.is_s2v:
            raise InputRefusal(
                "{audio} (with {image}, optionally {pose_video}) drives a Wan 2.2 S2V model; this model has no "
                "audio blocks: use one (e.g. --model wan2.2-s2v-14b) or drop {audio}", **NAMES,
            )  # fmt: skip

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        if request.input("audio") is None:
            raise InputRefusal("this is a Wan 2.2 S2V model: give the reference image ({image}) and speech ({audio})",
                               **NAMES)  # fmt: skip

    def check_request(self, request: GenerationRequest) -> None:
        if request.input("image") is None or request.input("audio") is None:
            raise InputRefusal("Wan S2V needs the reference image ({image}) and the speech ({audio})", **NAMES)
        if len(request.input("audio")) < SHORTEST_SPEECH:
            raise InputRefusal(
                f"{{audio}} is {len(request.input('audio'))} samples at 16 kHz; wav2vec2 needs at least "
                f"{SHORTEST_SPEECH} ({SHORTEST_SPEECH / 16_000:.3f} s): give a longer speech file", **NAMES,
            )  # fmt: skip

    def geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        """One clip's latents: infer_frames / 4 latent frames (the Wan 2.1 VAE's temporal compression)."""
        return attrs.evolve(geometry, frames=self.options_of(request).infer_frames // 4)

    def clips(self, request: GenerationRequest) -> int:
        options = self.options_of(request)
        return speech_clips(len(request.input("audio")), options.infer_frames, SAMPLE_FPS, options.num_repeat)

    def encoded_frames(self, request: GenerationRequest) -> int:
        return MOTION_FRAMES

    def output_frames(self, request: GenerationRequest) -> int:
        return emitted_frames(self.clips(request), self.options_of(request).infer_frames)

    def segment_frames(self, request: GenerationRequest) -> int:
        return MOTION_FRAMES + self.options_of(request).infer_frames  # a clip decodes behind its motion frames

    def segment_count(self, request: GenerationRequest) -> int:
        return self.clips(request)

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        """The bench's step: a clip after the first (with motion tokens)."""
        t, (frames, height, width) = shapes.transformer, shapes.latent_grid
        latent = (1, frames, height, width, t.out_channels)
        return Conditioning(
            extensions=S2V_EXTENSION.given(
                audio=(1, 4 * frames, AUDIO_LAYERS, t.s2v.audio_dim), pose=(*latent[:4], t.s2v.cond_dim),
                reference=(1, 1, height, width, t.out_channels),
                motion=(1, LATENT_MOTION_FRAMES, height, width, t.out_channels),
            )
        )  # fmt: skip

    def generate(self, run: ModeRun) -> Generated:
        request, parts = run.request, run.parts
        if len(run.requests) > 1:
            raise InvalidRequestError("Wan S2V runs one video at a time: send the requests one by one")
        options = self.options_of(request)
        frames, size = options.infer_frames, (request.height, request.width)
        with run.span("conditioning"):
            speech, clips = parts.speech_encoder.encode(request.input("audio"), infer_frames=frames, fps=SAMPLE_FPS)
            clips = clips if options.num_repeat == 0 else min(clips, options.num_repeat)
            reference = unit_pixels(run.cover(request.input("image"), *size))[None, None]  # [1, 1, H, W, 3]
            reference = parts.autoencoder.encode_video(reference)
            xp = array_namespace(reference)
            motion_frames = xp.zeros((1, MOTION_FRAMES, *size, 3), xp.float32)  # [-1, 1]: black
            poses = _pose_latents(run, request.input("pose_video"), clips, frames, size)
        latents: list[Any] = []
        denoised = None
        for clip in range(clips):
            first = DROP_FIRST_MOTION and clip == 0
            with run.span("conditioning"):
                motion = None if first else parts.autoencoder.encode_video(motion_frames)
                given = Conditioning(extensions=S2V_EXTENSION.given(
                    audio=speech[clip * frames : (clip + 1) * frames][None], pose=poses(clip), reference=reference,
                    motion=motion,
                ))  # fmt: skip
            denoised = run.denoise(segment_noise(run, clip), given, part=(clip, clips))
            if run.decode is None:
                latents.append(denoised.latents)
                if clip == clips - 1:
                    break  # latents only: the last clip conditions nothing
            with run.span("vae_decode"):
                ahead = reference if first else motion
                unit = parts.autoencoder.decode_to_unit(xp.concat([ahead, denoised.latents], axis=1))[:, -frames:]
                unit = unit[:, FIRST_CLIP_DROPPED:] if first else unit  # [1, f, H, W, 3] in [0, 1]
                kept = min(MOTION_FRAMES, unit.shape[1])
                newest = unit[:, unit.shape[1] - kept :] * 2.0 - 1.0
                motion_frames = xp.concat([motion_frames[:, kept:], newest], axis=1)
                if run.decode is not None:
                    run.emit(np.asarray(xp.round(unit * 255.0).astype(xp.uint8)))
        assert denoised is not None
        joined = xp.concat(latents, axis=1) if latents else denoised.latents
        return Generated(latents=joined, cache_report=denoised.cache_report)


def _pose_latents(run: ModeRun, pose: np.ndarray | None, clips: int, frames: int, size: tuple[int, int]) -> Any:
    """clip -> its pose latents [1, frames / 4, H', W', C]: zeros without a pose video (the official
    code encodes -1 frames and multiplies by 0); with one, as `load_pose_cond`: its first
    clips * frames frames (fitted as the reference, -1 past its end), each clip's behind a copy of
    its first frame, encoded, the first latent frame dropped."""
    if pose is None:
        g = run.geometry
        zeros = np.zeros((1, g.frames, g.height, g.width, g.channels), np.float32)
        return lambda clip: zeros
    video = np.full((clips * frames, *size, 3), -1.0, np.float32)
    given = pose[: clips * frames]
    video[: len(given)] = np.stack([unit_pixels(run.cover(frame, *size)) for frame in given])

    def clip_latents(clip: int) -> Any:
        part = video[clip * frames : (clip + 1) * frames]
        return run.parts.autoencoder.encode_video(np.concatenate([part[:1], part])[None])[:, 1:]

    return clip_latents


SPEECH_TO_VIDEO = SpeechToVideo()
