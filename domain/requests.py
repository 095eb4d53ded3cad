"""What one generation asks for, validated on construction so bad input fails before any load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.caching.settings import CacheSettings
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.lora import LoraSpec, check_request_loras, parse_lora_specs
from wanjax.domain.numbers import shown
from wanjax.domain.scheduling import (
    MAX_INFERENCE_STEPS,
    SIGMA_SCHEDULES,
    SOLVERS,
    check_sampler,
    checked_timesteps,
)

SIZE_MULTIPLE = 16  # VAE spatial factor 8 x transformer patch 2
MAX_SEED = 2**63 - 1
MAX_GUIDANCE_SCALE = 100.0  # far above any published recipe; 1e30 made uniform grey, inf NaN
MAX_SIZE = 16384  # pixels: 1024 positions (every Wan model's rope_max_seq_len) x patch 2 x VAE 8
MAX_FRAMES = 4093  # 4k+1 frames filling those 1024 positions at 4 frames per latent
FLOW_SHIFTS = (0.01, 100.0)
"""flow_shift's range: published recipes use 1 to 17; every solver's grid is finite over 1e-4 to
300 at 1 to 1000 steps; 100 is also ComfyUI's ModelSamplingSD3 ceiling."""
MAX_PROMPT_CHARACTERS = 20_000
"""A prompt or negative prompt's length at most: about 40 times what the text encoder reads
(512 tokens, roughly 2,000 characters of English), checked before anything tokenises it."""


def _fail(name: str, value: Any, fix: str) -> None:
    raise InvalidRequestError(f"{name}={shown(value)}: {fix}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pixel_size(_: Any, attribute: attrs.Attribute, value: int) -> None:
    """Validates a height or width: a multiple of 16 up to MAX_SIZE."""
    if not _is_int(value) or not SIZE_MULTIPLE <= value <= MAX_SIZE:
        _fail(attribute.name, value, f"must be an integer from {SIZE_MULTIPLE} to {MAX_SIZE}")
    if value % SIZE_MULTIPLE:
        lower = value - value % SIZE_MULTIPLE
        _fail(
            attribute.name,
            value,
            f"must be a multiple of {SIZE_MULTIPLE}; use {lower} or {lower + SIZE_MULTIPLE}",
        )


def frame_count(_: Any, attribute: attrs.Attribute, value: int) -> None:
    """Validates a frame count: 4k+1 up to MAX_FRAMES."""
    if not _is_int(value) or not 1 <= value <= MAX_FRAMES:
        _fail(attribute.name, value, f"must be an integer of the form 4k+1 from 1 to {MAX_FRAMES} (1, 5, ..., 81)")
    if value % 4 != 1:
        lower = value - (value - 1) % 4
        _fail(attribute.name, value, f"must be 4k+1 (the VAE packs 4 frames per latent); use {lower} or {lower + 4}")


def _steps(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not _is_int(value) or not 1 <= value <= MAX_INFERENCE_STEPS:
        _fail(
            attribute.name, value,
            f"must be an integer from 1 to {MAX_INFERENCE_STEPS} (one step per training timestep; "
            "published recipes use 4 to 50)",
        )  # fmt: skip


def _guidance(_: Any, attribute: attrs.Attribute, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= MAX_GUIDANCE_SCALE:
        _fail(
            attribute.name, value,
            f"must be a number >= 0 and at most {MAX_GUIDANCE_SCALE:g} (published Wan models use 3 to 6; "
            "guidance is on above 1)",
        )  # fmt: skip


def _flow_shift(_: Any, attribute: attrs.Attribute, value: float) -> None:
    low, high = FLOW_SHIFTS
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        _fail(attribute.name, value, f"must be a number from {low:g} to {high:g} (published Wan recipes use 1 to 17)")


def _optional_guidance(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None:
        _guidance(instance, attribute, value)


def _optional_ratio(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1):
        _fail(attribute.name, value, "must be a number strictly between 0 and 1 (e.g. 0.875), or unset")


def _frame_rate(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise InvalidRequestError(f"fps={shown(value)}: must be a whole number from 1 to 1000 frames a second")


def _seed(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not _is_int(value) or not 0 <= value <= MAX_SEED:
        _fail(attribute.name, value, f"must be an integer in [0, {MAX_SEED}]")


def _prompt(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    _text(instance, attribute, value)
    if not value.strip():
        _fail(attribute.name, value, "must be a non-empty text")


def _text(_: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str):
        _fail(attribute.name, value, "must be a text")
    if len(value) > MAX_PROMPT_CHARACTERS:
        _fail(
            attribute.name, f"<{len(value)} characters>",
            f"must be at most {MAX_PROMPT_CHARACTERS} characters (the text encoder reads its first 512 tokens)",
        )  # fmt: skip


def _inputs(value: Any) -> dict[str, Any]:
    """A mode's inputs by name (domain/modes/: each mode's `InputField`s); their kinds check their
    values once the mode is known (domain/modes/registry.check_request)."""
    if not isinstance(value, Mapping) or not all(isinstance(name, str) for name in value):
        _fail("inputs", value, "must be a mapping of input name -> value (e.g. {'pose_video': frames})")
    return {name: given for name, given in value.items() if given is not None}


def _solver(_: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SOLVERS:
        _fail(attribute.name, value, f"must be one of {', '.join(SOLVERS)}")


def _sigma_schedule(_: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SIGMA_SCHEDULES:
        _fail(attribute.name, value, f"must be one of {', '.join(SIGMA_SCHEDULES)}")


def _optional_timesteps(value: Any) -> tuple[float, ...] | None:
    return None if value is None else checked_timesteps(value)


def _loras(value: Any, _: Any, field: attrs.Attribute) -> tuple[LoraSpec, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        _fail(field.name, value, "must be a list of LoRAs (LoraSpec(path, scale), or PATH[:SCALE] text)")
    try:
        return parse_lora_specs(value)
    except ConfigError as err:
        raise InvalidRequestError(f"{field.name}: {err}") from None


_LORAS = attrs.Converter(_loras, takes_self=True, takes_field=True)


def _optional_step_index(_: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and (not _is_int(value) or not 0 <= value <= MAX_INFERENCE_STEPS):
        _fail(attribute.name, value, f"must be a step index from 0 to {MAX_INFERENCE_STEPS}, or unset")


@attrs.frozen(kw_only=True)
class GenerationRequest:
    """One generation: the prompt and every sampling choice, resolved, with the inputs and options
    of its mode. Which mode its inputs and options select, and that mode's rules, are
    `domain/modes/`'s (registry.check_request); this value knows no mode."""

    prompt: str = attrs.field(validator=_prompt)
    negative_prompt: str = attrs.field(default="", validator=_text)
    height: int = attrs.field(validator=pixel_size)
    width: int = attrs.field(validator=pixel_size)
    num_frames: int = attrs.field(validator=frame_count)
    num_inference_steps: int = attrs.field(validator=_steps)
    guidance_scale: float = attrs.field(validator=_guidance)
    guidance_scale_low: float | None = attrs.field(default=None, validator=_optional_guidance)
    """Guidance of the low-noise expert (Wan 2.2 A14B); None means `guidance_scale`."""
    boundary_ratio: float | None = attrs.field(default=None, validator=_optional_ratio)
    """Where the low-noise expert takes over, as a fraction of the 1000 training timesteps;
    None means the checkpoint's own value."""
    flow_shift: float = attrs.field(validator=_flow_shift)
    sample_solver: str = attrs.field(default="unipc", validator=_solver)
    sigma_schedule: str = attrs.field(default="official", validator=_sigma_schedule)
    """The UniPC noise grid: the Wan code's (`official`) or diffusers >= 0.37's (`diffusers`);
    dpm++ runs on the Wan code's only, euler on diffusers' Euler grid (docs/sampling.md)."""
    sample_timesteps: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_timesteps)
    """Few-step distilled sampling: the training timesteps to visit (e.g. 1000, 750, 500, 250),
    sampled with flow-match Euler; when set, it replaces num_inference_steps and sample_solver."""
    expert_switch_step: int | None = attrs.field(default=None, validator=_optional_step_index)
    """Wan 2.2 A14B: the first step of the low-noise expert (distilled A14B recipes split by
    step index); when set, it replaces boundary_ratio."""
    seed: int = attrs.field(default=0, validator=_seed)
    fps: int = attrs.field(default=16, validator=_frame_rate)
    """The video's frames a second (config `fps`): the mp4's rate, and the row of a SkyReels-V2
    model's fps embedding (16, or any other)."""
    inputs: Mapping[str, Any] = attrs.field(factory=dict, converter=_inputs, eq=False, repr=False)
    """The inputs of the mode the request runs in, by input name (domain/modes/: each mode's
    `InputField`s; an image RGB uint8 [H, W, 3], frames [F, H, W, 3], ...), left out of
    comparisons (the videos of one batch share them)."""
    options: Any = None
    """The options of the mode the request runs in: an instance of that mode's `options` class
    (domain/modes/), None for a mode without options or with its defaults."""
    loras: tuple[LoraSpec, ...] = attrs.field(default=(), converter=_LORAS)
    """LoRAs applied to the transformer for this run only (Wan 2.2 A14B: the high-noise expert),
    added in order on top of the model as loaded (its config's `loras` included)."""
    loras_low: tuple[LoraSpec, ...] = attrs.field(default=(), converter=_LORAS)
    """Wan 2.2 A14B: LoRAs applied to the low-noise expert for this run only."""
    cache: CacheSettings = attrs.field(factory=CacheSettings, validator=attrs.validators.instance_of(CacheSettings))
    """The step-cache policy and its parameters (docs/caching.md); the default computes every step."""

    def __attrs_post_init__(self) -> None:
        check_sampler(self.sample_solver, self.sigma_schedule)
        try:
            check_request_loras({"loras": self.loras, "loras_low": self.loras_low})
        except ConfigError as err:
            raise InvalidRequestError(str(err)) from None

    def input(self, name: str) -> Any:
        """The mode's input `name` (None: not given)."""
        return self.inputs.get(name)

    @property
    def uses_guidance(self) -> bool:
        """Classifier-free guidance runs only when `guidance_scale` is above 1, as in diffusers'
        WanPipeline (whatever the low-noise expert's scale)."""
        return self.guidance_scale > 1.0
