"""Video-to-video: `video` (and its `strength`), for the models that generate from text (Wan 2.1
T2V, Wan 2.2 T2V A14B and TI2V-5B); how much of the sampling schedule a source video skips, and
the noisy start.

As diffusers' WanVideoToVideoPipeline: `strength` in (0, 1] keeps the last
int(num_steps * strength) steps of the full schedule (its `get_timesteps`), and the run
starts from the encoded video mixed with noise at the first kept step's sigma, the flow
interpolation (1 - sigma) * video + sigma * noise (UniPC's `add_noise`, flow-match Euler's
`scale_noise`). The official Wan code has no video-to-video (docs/sampling.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import GenerationMode, InputField, InputKind, ModelTraits, ModeRun, refuse

if TYPE_CHECKING:
    from wanjax.domain.requests import GenerationRequest

DEFAULT_STRENGTH = 0.8
"""diffusers' WanVideoToVideoPipeline default."""


def first_denoising_step(num_steps: int, strength: float) -> int:
    """The index of the first step a video-to-video run takes of a `num_steps`-step schedule."""
    kept = min(int(num_steps * strength), num_steps)
    if kept < 1:
        raise InvalidRequestError(
            f"strength={strength!r} of {num_steps} steps keeps int({num_steps} * {strength!r}) = 0 steps; "
            f"raise strength to at least {1 / num_steps:.4g} or give more steps"
        )
    return num_steps - kept


def noised_latents(video_latents: Any, noise: Any, sigma: float) -> Any:
    """(1 - sigma) * video_latents + sigma * noise in float32, as diffusers mixes them; numpy or
    jax arrays (the video's latents [1, ...] broadcast over the noise's batch)."""
    sigma = np.float32(sigma)
    return (np.float32(1.0) - sigma) * video_latents + sigma * noise


VIDEO = InputField(
    name="video", flag="--video", kind=InputKind.VIDEO, http="video",
    help="source video (mp4, or a folder of png/jpg frames) for video-to-video on text-to-video models",
)  # fmt: skip


class VideoToVideo(GenerationMode):
    name = "video-to-video"
    inputs = (VIDEO,)
    selected_by = ("video", "strength")

    def check_request(self, request: GenerationRequest) -> None:
        if request.video is None:
            raise InvalidRequestError(
                f"strength={request.strength!r}: applies to video-to-video only: give the source video (--video PATH)"
            )
        if request.image is not None or request.last_image is not None:
            refuse("video", "video-to-video starts from the video alone: drop --image (and --last-image)")
        steps = request.num_inference_steps if request.sample_timesteps is None else len(request.sample_timesteps)
        first_denoising_step(steps, request.denoising_strength)
        if len(request.video) < request.num_frames:
            longest = len(request.video) - (len(request.video) - 1) % 4
            raise InvalidRequestError(
                f"video=<{len(request.video)} frames>: has fewer frames than num_frames={request.num_frames}; give a "
                f"longer video or lower num_frames to at most {longest} (4k+1)"
            )

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        if model.image_conditioning is ImageConditioning.CHANNELS:
            raise InvalidRequestError(
                "this is an image-to-video model; video-to-video (--video) runs on a text-to-video model "
                "(Wan 2.1 T2V, Wan 2.2 T2V A14B or TI2V-5B)"
            )
        if model.transformer.is_vace:
            refuse("video", "on a VACE model the video is the control video: give it as vace=VaceInputs(video=...)")

    def first_step(self, request: GenerationRequest, num_steps: int) -> int:
        return first_denoising_step(num_steps, request.denoising_strength)

    def warmup_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return {"strength": 1.0}  # every step of the short run runs, whatever the strength would keep

    def encoded_frames(self, request: GenerationRequest) -> int:
        return request.num_frames

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        request = run.request
        video = request.video[: request.num_frames]
        encoded = run.parts.autoencoder.encode_frames(video, request.height, request.width)
        return noised_latents(encoded, run.noise, run.plan.solver.sigmas[0]), Conditioning()


VIDEO_TO_VIDEO = VideoToVideo()
