"""Generation config: every key a preset or `--set key=value` may give, typed and validated.

Keys that maxdiffusion's Wan configs use keep their names (scan_layers, flow_shift, ...).
Engine keys (model, dtype, ...) decide what is loaded; the others are sampling defaults
that each request may override.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.attention import ATTENTION_BACKENDS
from wanjax.domain.caching.published import PUBLISHED
from wanjax.domain.caching.settings import CONFIG_KEYS as CACHE_KEYS
from wanjax.domain.caching.settings import POLICIES, CacheSettings, resolve_cache_settings
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.lora import parse_lora_specs
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.scheduling import SIGMA_SCHEDULES, SOLVERS, check_sampler
from wanjax.domain.sharding import CONTEXT_PARALLEL, parse_rule_overrides

DTYPES = ("auto", "float32", "bfloat16")
WEIGHTS_DTYPES = ("auto", "float32", "bfloat16", "float8_e4m3fn")
SCHEDULER_DTYPES = ("float32", "bfloat16")


def _one_of(allowed: tuple[str, ...]):
    def check(_: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in allowed:
            raise ConfigError(f"{attribute.name}={value!r}: must be one of {', '.join(allowed)}")

    return check


def _positive(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{attribute.name}={value!r}: must be >= 1")


MAX_TEXT_TOKENS = 512  # text_len of every Wan model: what their cross-attention was trained on


def _text_tokens(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 1 <= value <= MAX_TEXT_TOKENS:
        raise ConfigError(
            f"{attribute.name}={value!r}: must be from 1 to {MAX_TEXT_TOKENS} (the Wan models' text_len); longer "
            "prompts are cut to it"
        )


def _optional_positive(_: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{attribute.name}={value!r}: must be >= 1, or none")


def _axis_rules(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    parse_rule_overrides(value)


def _lora_specs(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    try:
        parse_lora_specs(value)
    except ConfigError as err:
        raise ConfigError(f"{attribute.name}: {err}") from None


_CACHE = CacheSettings()  # the published defaults of the cache keys


@attrs.frozen(kw_only=True)
class GenerationConfig:
    """A preset with overrides applied."""

    # engine
    model: str = "demo"
    dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    scan_layers: bool = True
    attention: str = attrs.field(default="auto", validator=_one_of(ATTENTION_BACKENDS))
    """The attention kernel; auto: blockwise on CPU, cuDNN on GPU, Pallas on TPU (domain/attention.py)."""
    max_sequence_length: int = attrs.field(default=512, validator=_text_tokens)
    loras: tuple[str, ...] = attrs.field(default=(), validator=_lora_specs, metadata={"item": str})
    """LoRAs merged into the transformer (the high-noise expert on Wan 2.2 A14B): PATH[:SCALE] each."""
    loras_low: tuple[str, ...] = attrs.field(default=(), validator=_lora_specs, metadata={"item": str})
    """LoRAs merged into the low-noise expert `transformer_2` of Wan 2.2 A14B models."""
    # denoising speed (docs/performance.md, "Denoising speed"); none of these changes the model
    activations_dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    """The transformer's compute dtype: auto (= dtype), float32 or bfloat16."""
    scheduler_dtype: str = attrs.field(default="float32", validator=_one_of(SCHEDULER_DTYPES))
    """The solver state between steps and its arithmetic: float32 (as diffusers) or bfloat16."""
    use_kv_cache: bool = True
    """Cross-attention K/V of the text (and I2V image) computed once per generation, not every step."""
    scan_diffusion_loop: bool = False
    """All denoising steps as one jax.lax.scan (no per-step progress; a new step count recompiles)."""
    use_batched_text_encoder: bool = True
    """Prompts and negative prompts encoded in one text-encoder call (false: one call each)."""
    text_encoder_dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    """The UMT5 encoder's dtype: auto (= dtype), float32 or bfloat16 (as Wan's own code runs it)."""
    compile_text_encoder: bool = False
    """torch.compile the text encoder (pays a compile on the first prompt batch of each size)."""
    # VAE at scale (docs/performance.md, "VAE decode")
    vae_dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    """The VAE's compute dtype: auto (= dtype), float32 or bfloat16."""
    vae_weights_dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    """Storage of the VAE weights: auto (= vae_dtype), float32 or bfloat16."""
    vae_decode_chunk: int | None = attrs.field(default=1, validator=_optional_positive, metadata={"parse": int})
    """Latent frames per step of the decode scan (memory flat in frame count); none = unrolled per frame."""
    vae_encode_chunk: int | None = attrs.field(default=None, validator=_optional_positive, metadata={"parse": int})
    """Pixel frames (a multiple of 4) per step of the encode scan; none = unrolled."""
    vae_tiling: bool = False
    """Spatial tiling of VAE decode and encode with overlap blending, for sizes that do not fit memory."""
    vae_tile_size: int = attrs.field(default=256, validator=_positive)
    """Tile edge in output pixels (diffusers' tile_sample_min_height/width)."""
    vae_tile_stride: int = attrs.field(default=192, validator=_positive)
    """Tile stride in output pixels; tiles overlap by size - stride, blended linearly."""
    # cache policies (docs/caching.md); ranges and conflicts are checked by CacheSettings
    cache_policy: str = attrs.field(default="none", validator=_one_of(POLICIES))
    """The step cache: none, magcache, teacache, cfg_cache or sencache (one at a time)."""
    cache_model: str = attrs.field(default="none", validator=_one_of(("none", *PUBLISHED)))
    """Whose published calibration (MagCache curve, TeaCache polynomial) fills mag_ratios,
    mag_ratios_split and teacache_coefficients when they are unset."""
    magcache_thresh: float = _CACHE.magcache_thresh
    magcache_K: int = _CACHE.magcache_K
    retention_ratio: float = _CACHE.retention_ratio
    mag_ratios: tuple[float, ...] | None = attrs.field(default=None, metadata={"parse": tuple, "item": float})
    """MagCache's calibrated curve, cond/uncond interleaved (maxdiffusion: mag_ratios_base)."""
    mag_ratios_split: int | None = attrs.field(default=None, metadata={"parse": int})
    magcache_calibration: bool = _CACHE.magcache_calibration
    """Run dense and record the MagCache curve of this model, dtype and step count."""
    teacache_thresh: float = _CACHE.teacache_thresh
    teacache_use_ret_steps: bool = _CACHE.teacache_use_ret_steps
    teacache_coefficients: tuple[float, ...] | None = attrs.field(
        default=None, metadata={"parse": tuple, "item": float}
    )
    cfg_cache_interval: int = _CACHE.cfg_cache_interval
    cfg_cache_start_ratio: float = _CACHE.cfg_cache_start_ratio
    cfg_cache_end_ratio: float = _CACHE.cfg_cache_end_ratio
    cfg_cache_alpha: float = _CACHE.cfg_cache_alpha
    sencache_thresh: float = _CACHE.sencache_thresh
    sencache_alpha_x: float = _CACHE.sencache_alpha_x
    sencache_alpha_t: float = _CACHE.sencache_alpha_t
    sencache_K: int = _CACHE.sencache_K
    sencache_start_ratio: float = _CACHE.sencache_start_ratio
    sencache_end_ratio: float = _CACHE.sencache_end_ratio
    # start-up (docs/performance.md, "Start-up")
    weights_dtype: str = attrs.field(default="auto", validator=_one_of(WEIGHTS_DTYPES))
    """Storage of the transformer weights: auto (= dtype), float32, bfloat16, or float8_e4m3fn
    (the blocks' matmul kernels in fp8, everything else in `dtype`; computed in activations_dtype)."""
    transformer_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """Transformer weights read from here instead of the model folder: a .safetensors file, a
    shard index or a folder, in diffusers or original Wan / ComfyUI naming."""
    transformer_2_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """The same for Wan 2.2 A14B's low-noise expert."""
    vae_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """VAE weights read from here instead of the model's: a .pth or .safetensors in the original
    Wan naming (Wan2.1_VAE.pth, ComfyUI's wan_2.1_vae.safetensors) or diffusers'."""
    text_encoder_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """UMT5 encoder weights read from here instead of the model's: one .pth or .safetensors in the
    official Wan naming (models_t5_umt5-xxl-enc-bf16.pth) or transformers'."""
    image_encoder_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """CLIP image encoder weights (Wan 2.1 I2V) read from here: Wan's open-clip .pth, or a
    .safetensors in its or transformers' naming."""
    weights_cache: bool = False
    """Save the converted transformer weights once (orbax) and restore them on later starts."""
    weights_cache_dir: str = "auto"
    """Where: auto is $WANJAX_CACHE/weights (else ~/.cache/wanjax/weights)."""
    compilation_cache_dir: str = "auto"
    """JAX's persistent compilation cache (set at CLI start): auto is $WANJAX_CACHE/xla (else
    ~/.cache/wanjax/xla); empty or none turns it off."""
    text_embeddings_cache_dir: str = "auto"
    """Prompt embeddings kept on disk, so a run repeating its prompts skips the text encoder: auto
    is $WANJAX_CACHE/text (else ~/.cache/wanjax/text); empty or none turns it off."""
    warmup: bool = False
    """Before the timed run, a 2-step run that compiles everything; its output is never written."""
    # sharding (docs/performance.md, "Sharding")
    mesh_data: int = attrs.field(default=1, validator=_positive)
    """Devices splitting the rows: videos and CFG's conditional/unconditional halves."""
    mesh_fsdp: int = attrs.field(default=1, validator=_positive)
    """Devices splitting the rows and each weight's model-width dimension (gathered per layer)."""
    mesh_tensor: int = attrs.field(default=1, validator=_positive)
    """Devices splitting the attention heads and MLP columns (tensor parallelism)."""
    mesh_context: int = attrs.field(default=1, validator=_positive)
    """Devices splitting the video tokens (context-parallel attention). All four 1: one device."""
    context_parallel: str = attrs.field(default="ulysses", validator=_one_of(CONTEXT_PARALLEL))
    """Self-attention over the context axis: ulysses (all-to-all) or ring (K/V blocks passed around)."""
    logical_axis_rules: tuple[str, ...] = attrs.field(default=(), validator=_axis_rules, metadata={"item": str})
    """Overrides of the default logical axis rules, LOGICAL=AXIS[+AXIS] each (LOGICAL= replicates)."""
    # sampling defaults
    height: int = 480
    width: int = 832
    num_frames: int = 81
    num_inference_steps: int = 50
    guidance_scale: float = 5.0
    guidance_scale_low: float | None = attrs.field(default=None, metadata={"parse": float})
    boundary_ratio: float | None = attrs.field(default=None, metadata={"parse": float})
    flow_shift: float = 3.0
    sample_solver: str = attrs.field(default="unipc", validator=_one_of(SOLVERS))
    """unipc (UniPC-2, Wan's default), dpm++ (the Wan code's DPM-Solver++) or euler (flow-match Euler)."""
    sigma_schedule: str = attrs.field(default="official", validator=_one_of(SIGMA_SCHEDULES))
    """The UniPC noise grid: official (the Wan code's) or diffusers (diffusers >= 0.37's), docs/sampling.md."""
    sample_timesteps: tuple[float, ...] | None = attrs.field(default=None, metadata={"parse": tuple, "item": float})
    expert_switch_step: int | None = attrs.field(default=None, metadata={"parse": int})
    strength: float | None = attrs.field(default=None, metadata={"parse": float})
    """Video-to-video: the share of the steps run on the noised source video, (0, 1]; unset: 0.8."""
    negative_prompt: str = ""
    seed: int = 0
    fps: int = attrs.field(default=16, validator=_positive)
    origins: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False, metadata={"key": False})
    """Where each key that is not at its generic default got its value (a preset, a checkpoint,
    --set); not a config key itself."""

    def __attrs_post_init__(self) -> None:
        try:
            self.cache_settings()
            check_sampler(self.sample_solver, self.sigma_schedule)
        except InvalidRequestError as err:
            raise ConfigError(str(err)) from None

    def cache_settings(self) -> CacheSettings:
        """The cache keys as the request's CacheSettings, `cache_model`'s calibration filled in."""
        return resolve_cache_settings({key: getattr(self, key) for key in CACHE_KEYS})

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in attrs.fields(cls) if f.metadata.get("key", True))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "config") -> GenerationConfig:
        """Builds a config from typed values (a parsed preset), rejecting unknown keys."""
        return cls().with_overrides(values, source=source)

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str = "--set") -> GenerationConfig:
        """A copy with `overrides` applied, each key's origin set to `source`; string values
        are parsed to the key's type."""
        typed = _typed(overrides, source)
        return attrs.evolve(self, **typed, origins={**self.origins, **dict.fromkeys(typed, source)})

    def origin(self, key: str) -> str:
        """Where `key`'s value came from: the source that last set it, else "default"."""
        return self.origins.get(key, "default")

    def describe(self, keys: tuple[str, ...] = ()) -> str:
        """One line per key (default: the sampling keys): its value and where it came from."""
        lines = [f"  {key:<22} {getattr(self, key)!r:<14} ({self.origin(key)})" for key in keys or SAMPLING_KEYS]
        return "\n".join(["settings (value, where from):", *lines])

    def request(self, prompt: str, **overrides: Any) -> GenerationRequest:
        """A request with this config's sampling defaults, overridden where given (None = default)."""
        names = {f.name for f in attrs.fields(GenerationRequest)}
        values = {name: getattr(self, name) for name in names & set(self.keys())}
        values["cache"] = self.cache_settings()
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"unknown request field(s) {sorted(unknown)}; known: {sorted(names)}")
        return GenerationRequest(prompt=prompt, **values)


SAMPLING_KEYS = (
    "height", "width", "num_frames", "fps", "num_inference_steps", "sample_solver", "sigma_schedule",
    "flow_shift", "sample_timesteps", "guidance_scale", "guidance_scale_low", "boundary_ratio",
    "expert_switch_step", "negative_prompt", "seed",
)  # fmt: skip
"""The keys that decide the noise schedule and guidance: what `describe` reports by default."""

# Other names users of maxdiffusion and diffusers know for the same keys.
ALIASES = {
    "guidance_scale_high": "guidance_scale",
    "guidance_scale_2": "guidance_scale_low",
    "mag_ratios_base": "mag_ratios",
}
# maxdiffusion's on/off switches, each replaced here by one value of `cache_policy`.
CACHE_SWITCHES = {
    "use_magcache": "magcache",
    "use_teacache": "teacache",
    "use_cfg_cache": "cfg_cache",
    "use_sen_cache": "sencache",
}


def _typed(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for given, value in values.items():
        key = ALIASES.get(given, given)
        _check_known(key, source)
        if key in typed:
            raise ConfigError(f"{source}: {given!r} sets {key!r} a second time; give it once")
        typed[key] = _coerce(key, value, source)
    return typed


def _check_known(key: str, source: str) -> None:
    known = GenerationConfig.keys()
    if key in known:
        return
    if key in CACHE_SWITCHES:
        raise ConfigError(
            f"{source}: {key!r} is maxdiffusion's switch; here one key chooses the step cache: "
            f"cache_policy={CACHE_SWITCHES[key]} (docs/caching.md)"
        )
    close = difflib.get_close_matches(key, (*known, *ALIASES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{source}: unknown config key {key!r}.{hint} Known keys: {', '.join(known)}")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _coerce(key: str, value: Any, source: str) -> Any:
    """Parses `value` into the type of `key`'s default; a mismatch is a ConfigError.

    Keys whose default is None name their type in metadata["parse"] and accept none/null.
    """
    field = attrs.fields_dict(GenerationConfig)[key]
    kind = field.metadata.get("parse", type(field.default))
    if "parse" in field.metadata and (value is None or str(value).strip().lower() in ("none", "null", "")):
        return None
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            return _finite(value)
        if kind is tuple:
            return _items(value, field.metadata["item"])
        return value if isinstance(value, str) else str(value)
    except ValueError:
        name = f"comma-separated list of {field.metadata['item'].__name__}" if kind is tuple else kind.__name__
        raise ConfigError(f"{source}: {key}={value!r} is not a valid {name}") from None
    except ArithmeticError:
        raise ConfigError(f"{source}: {key}={value!r}: must be a finite number (no nan or inf)") from None


def _finite(value: Any) -> float:
    """A float from `value`; ValueError for what is not a number, ArithmeticError for nan and inf."""
    if isinstance(value, bool):
        raise ValueError
    number = float(value)
    if not math.isfinite(number):
        raise ArithmeticError
    return number


def _items(value: Any, item: type) -> tuple[Any, ...]:
    """A YAML list, or a comma-separated text (`--set`), as a tuple of `item`; blanks dropped."""
    try:
        parts = value.split(",") if isinstance(value, str) else list(value)
        texts = [part.strip() if isinstance(part, str) else part for part in parts]
        if item is not str and any(isinstance(t, bool) for t in texts):
            raise ValueError
        return tuple((_finite if item is float else item)(t) for t in texts if t != "")
    except TypeError:
        raise ValueError from None
