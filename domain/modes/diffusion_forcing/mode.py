"""SkyReels-V2 Diffusion Forcing (diffusers' `SkyReelsV2DiffusionForcingPipeline`): the default mode
of a SkyReels-V2 model. Each latent frame of a window moves down the plan's timesteps on its own
schedule (domain/frame_schedule.py); a video longer than `base_num_frames` runs in windows of that
many (the shared layout of domain/modes/segments.py, in latent frames, the last window ending with
the video), each after the first given the video's last `overlap_history` frames as its finished
first frames (their latents, cut to whole causal blocks) and adding the frames after them.

The whole video's noise is drawn once, in the final latents' shape (or given: `--latents`): latent
frame g of a window starts from the noise of frame g of the video, so a frame starts, in the window
that first makes it, from its own slice. The windows' new latents are joined and decoded once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from wanjax.domain.attention_call import FrameBlockCausal
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.fps import FPS_EXTENSION, FPS_ROWS, fps_row
from wanjax.domain.frame_schedule import frame_blocks, frame_schedule
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.modes.base import Generated, GenerationMode, ModelTraits, ModeRun, ReceivedShapes, array_namespace
from wanjax.domain.modes.diffusion_forcing.options import DiffusionForcingOptions
from wanjax.domain.modes.image_to_video import IMAGE
from wanjax.domain.modes.segments import Segments, Window

if TYPE_CHECKING:
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.requests import GenerationRequest


def latent_frames(frames: int, temporal_compression: int = 4) -> int:
    """The latent frames of `frames` pixel frames (the VAE keeps the first, then packs the rest)."""
    return (frames - 1) // temporal_compression + 1


EXTENDED_VIDEO = InputField(
    name="video", flag="--video", kind=kinds.WHOLE_SIZED_VIDEO, http="video",
    help="a video to extend (SkyReels-V2 DF: its last overlap_history frames start the new ones)",
)  # fmt: skip


class DiffusionForcing(GenerationMode):
    name = "diffusion-forcing"
    options = DiffusionForcingOptions
    inputs = (IMAGE, EXTENDED_VIDEO)
    together = 1  # a first frame or a video to extend

    def default_on(self, model: ModelTraits) -> bool:
        return model.transformer.diffusion_forcing

    def check_model(self, model: ModelTraits) -> None:
        if not model.transformer.diffusion_forcing:
            raise InvalidRequestError(
                "Diffusion Forcing's settings (base_num_frames, overlap_history, ar_step, causal_block_size, "
                "addnoise_condition) need a SkyReels-V2 DF model: leave them out, or use a SkyReels-V2-DF checkpoint"
            )

    def check_request(self, request: GenerationRequest) -> None:
        options = self.options_of(request)
        if len(request.inputs) > 1:
            raise InputRefusal("give {image} (the first frame) or {video} (a video to extend), not both",
                               image=IMAGE, video=EXTENDED_VIDEO)  # fmt: skip
        if request.input("video") is not None and options.overlap_history is None:
            raise InputRefusal("extending {video} needs overlap_history, the frames of it the new ones start from "
                               "(SkyReels-V2 suggests 17 or 37)", video=EXTENDED_VIDEO)  # fmt: skip
        if request.num_frames > options.base_num_frames and options.overlap_history is None:
            raise InvalidRequestError(
                f"num_frames={request.num_frames} is more than base_num_frames={options.base_num_frames}: the video "
                "runs in windows, so set overlap_history, the frames each window takes from the one before "
                "(SkyReels-V2 suggests 17 or 37)"
            )
        if options.overlap_history is not None and options.overlap_history >= options.base_num_frames:
            raise InvalidRequestError(
                f"overlap_history={options.overlap_history}: must be fewer frames than base_num_frames="
                f"{options.base_num_frames}, so that each window adds frames"
            )
        if request.cache.policy != "none":
            raise InvalidRequestError(
                f"cache_policy={request.cache.policy}: the step caches do not follow Diffusion Forcing's per-frame "
                "noise levels; use cache_policy=none with a SkyReels-V2 DF model"
            )

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        blocks = self.causal_block_size(request, model)
        for window in self.segments(request, model.vae.temporal_compression).windows(clipped=True):
            frame_schedule(window.length, 1, ar_step=0, causal_block_size=blocks)  # refuses a split block

    def attention_structure(self, request: GenerationRequest, model: ModelTraits) -> FrameBlockCausal | None:
        return frame_blocks(self.causal_block_size(request, model))

    def causal_block_size(self, request: GenerationRequest, model: ModelTraits) -> int:
        chosen = self.options_of(request).causal_block_size
        return model.transformer.num_frame_per_block if chosen is None else chosen

    def segments(self, request: GenerationRequest, temporal_compression: int = 4) -> Segments:
        """The windows, in latent frames: one of the whole video unless it is longer than base_num_frames."""
        options, frames = self.options_of(request), latent_frames(request.num_frames, temporal_compression)
        extends = request.input("video") is not None  # windows always: the video's end starts the first
        if (request.num_frames <= options.base_num_frames and not extends) or options.overlap_history is None:
            return Segments(frames=frames, length=frames, overlap=0)
        base = latent_frames(options.base_num_frames, temporal_compression)
        return Segments(frames=frames, length=base, overlap=latent_frames(options.overlap_history, temporal_compression))

    def run_geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        return attrs.evolve(geometry, frames=self.segments(request).windows(clipped=True)[0].length)

    def segment_count(self, request: GenerationRequest) -> int:
        return self.segments(request).count

    def encoded_frames(self, request: GenerationRequest) -> int:
        options, video = self.options_of(request), request.input("video")
        if video is not None:
            return min(len(video), options.overlap_history or 1)
        return 1 if request.input("image") is not None else 0

    def output_frames(self, request: GenerationRequest) -> int:
        video = request.input("video")
        return request.num_frames + (0 if video is None else len(video))

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        if not shapes.transformer.inject_sample_info:
            return Conditioning()
        return Conditioning(extensions=FPS_EXTENSION.given(row=(1, FPS_ROWS)))

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        if not run.model.transformer.inject_sample_info:
            return run.noise, Conditioning()
        row = np.eye(FPS_ROWS, dtype=np.float32)[None, fps_row(run.request.fps)]  # [1, 2]
        return run.noise, Conditioning(extensions=FPS_EXTENSION.given(row=row))

    def generate(self, run: ModeRun) -> Generated:
        request, options = run.request, self.options_of(run.request)
        with run.span("conditioning"):
            noise, conditioning = self.conditioning(run)
        xp = array_namespace(noise)
        segments = self.segments(request, run.model.vae.temporal_compression)
        blocks = self.causal_block_size(request, run.model)
        given = segments.overlap - segments.overlap % blocks  # the prefix: whole causal blocks of the overlap
        start = self.start(run, blocks)
        windows, pieces, tail, denoised = segments.windows(clipped=True), [], None, None
        for window in windows:
            latents = noise[:, window.frames]
            head = start if not window.index else tail[:, :given]
            prefix = 0 if head is None else head.shape[1]
            if prefix:
                head = xp.broadcast_to(head, (latents.shape[0], *head.shape[1:]))
                latents = xp.concat([head, latents[:, prefix:]], axis=1)
            schedule = frame_schedule(
                window.length, run.plan.num_steps, ar_step=options.ar_step, causal_block_size=blocks, prefix=prefix,
                addnoise_condition=options.addnoise_condition, seed=request.seed + window.index,
            )  # fmt: skip
            denoised = run.denoise(latents, conditioning, part=(window.index, len(windows)), frames=schedule)
            new = _new_frames(denoised.latents, window)
            pieces.append(new)
            # the video's last `overlap` latent frames so far, joined window by window (arrays of the
            # same shapes each time, so a repeated window compiles nothing, however long the video)
            joined = new if tail is None else xp.concat([tail, new], axis=1)
            tail = joined[:, joined.shape[1] - segments.overlap :]
        assert denoised is not None
        video = pieces[0] if len(pieces) == 1 else xp.concat(pieces, axis=1)
        if run.decode is not None:
            extended = request.input("video")
            if extended is not None:  # the video extended, then what was made (diffusers' output)
                run.emit(np.broadcast_to(extended[None], (video.shape[0], *extended.shape)))
            run.emit(run.decode(video))
        return Generated(latents=video, cache_report=denoised.cache_report)

    def start(self, run: ModeRun, blocks: int) -> Any:
        """The latents the first window is given, [1, P, H', W', C]: the image's (one frame), the
        extended video's last overlap_history frames' (cut to whole causal blocks), or None."""
        request, autoencoder = run.request, run.parts.autoencoder
        image, video = request.input("image"), request.input("video")
        if image is not None:
            with run.span("vae_encode"):
                return autoencoder.encode_image(image, request.height, request.width, num_frames=1)
        if video is None:
            return None
        overlap = self.options_of(request).overlap_history
        with run.span("vae_encode"):
            latents = autoencoder.encode_frames(video[len(video) - min(overlap, len(video)) :], request.height, request.width)
        return latents[:, : latents.shape[1] - latents.shape[1] % blocks]


def _new_frames(latents: Any, window: Window) -> Any:
    """The latents a window adds to the video: those after the overlap it was given."""
    return latents[:, window.given :]


DIFFUSION_FORCING = DiffusionForcing()
