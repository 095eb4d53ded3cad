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

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.modes.base import GenerationMode, ModelTraits, ModeRun, refuse
from wanjax.domain.numbers import shown

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


def _strength(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be a number in (0, 1]: the share of the steps run on the video "
            f"({DEFAULT_STRENGTH} default)"
        )


@attrs.frozen(kw_only=True)
class VideoToVideoOptions:
    strength: float | None = attrs.field(default=None, validator=_strength, metadata={"parse": float})
    """The share of the sampling steps run on the noised video, in (0, 1]; None means DEFAULT_STRENGTH."""

    @property
    def denoising_strength(self) -> float:
        """The strength the run uses: `strength`, else DEFAULT_STRENGTH."""
        return DEFAULT_STRENGTH if self.strength is None else self.strength


VIDEO = InputField(
    name="video", flag="--video", kind=kinds.VIDEO, http="video",
    help="source video (mp4, or a folder of png/jpg frames) for video-to-video on text-to-video models",
)  # fmt: skip


class VideoToVideo(GenerationMode):
    name = "video-to-video"
    inputs = (VIDEO,)
    options = VideoToVideoOptions
    selected_by = ("video",)

    def check_request(self, request: GenerationRequest) -> None:
        video, strength = request.input("video"), self.options_of(request).denoising_strength
        if video is None:
            raise InputRefusal(
                f"strength={strength!r}: applies to video-to-video only: give the source video ({{video}})", video=VIDEO
            )
        steps = request.num_inference_steps if request.sample_timesteps is None else len(request.sample_timesteps)
        first_denoising_step(steps, strength)
        if len(video) < request.num_frames:
            longest = len(video) - (len(video) - 1) % 4
            raise InputRefusal(
                f"{{video}}=<{len(video)} frames>: has fewer frames than num_frames={request.num_frames}; give a "
                f"longer video or lower num_frames to at most {longest} (4k+1)", video=VIDEO,
            )

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        if model.image_conditioning is ImageConditioning.CHANNELS:
            raise InputRefusal(
                "this is an image-to-video model; video-to-video ({video}) runs on a text-to-video model "
                "(Wan 2.1 T2V, Wan 2.2 T2V A14B or TI2V-5B)", video=VIDEO,
            )
        if model.transformer.is_vace:
            refuse(VIDEO, "on a VACE model the video is the control video: give it as the input control_video")

    def first_step(self, request: GenerationRequest, num_steps: int) -> int:
        return first_denoising_step(num_steps, self.options_of(request).denoising_strength)

    def warmup_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return {"options": VideoToVideoOptions(strength=1.0)}  # every step of the short run runs

    def encoded_frames(self, request: GenerationRequest) -> int:
        return request.num_frames

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        request = run.request
        video = request.input("video")[: request.num_frames]
        encoded = run.parts.autoencoder.encode_frames(video, request.height, request.width)
        return noised_latents(encoded, run.noise, run.plan.solver.sigmas[0]), Conditioning()


VIDEO_TO_VIDEO = VideoToVideo()
