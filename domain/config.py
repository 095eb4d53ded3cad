"""The generation config: every key a preset or `--set key=value` may give, typed, validated and
routed into its component's section (domain/settings.py).

Keys that maxdiffusion's Wan configs use keep their names (scan_layers, flow_shift, ...). The
model, engine, VAE, cache, mesh and start-up sections decide what is loaded and how; the
sampling section holds the defaults each request may override, the mode options section the
defaults of each mode's options (domain/modes/options.py).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.attention import check_ring_attention
from wanjax.domain.caching.settings import CacheSettings
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.modes.options import ModeOptionDefaults
from wanjax.domain.modes.registry import check_request, input_names, mode_options
from wanjax.domain.numbers import parse_decimal, parse_whole, shown
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.scheduling import check_sampler
from wanjax.domain.settings import (
    DenoiserSettings,
    MeshSettings,
    ModelSettings,
    SamplingDefaults,
    StartupSettings,
    TextEncoderSettings,
    VaeSettings,
    flat_key,
    resolved_denoiser,
    resolved_model,
    resolved_text_encoder,
    resolved_vae,
)

SECTIONS: dict[str, type] = {
    "model": ModelSettings,
    "denoiser": DenoiserSettings,
    "text_encoder": TextEncoderSettings,
    "vae": VaeSettings,
    "cache": CacheSettings,
    "mesh": MeshSettings,
    "startup": StartupSettings,
    "sampling": SamplingDefaults,
    "mode_options": ModeOptionDefaults,
}
"""GenerationConfig's sections, by attribute name."""

ROUTES: dict[str, tuple[str, attrs.Attribute]] = {
    flat_key(field): (section, field) for section, kind in SECTIONS.items() for field in attrs.fields(kind)
}
"""The routing table: each flat config key -> (its section, the section's field)."""
CACHE_KEYS = tuple(key for key, (section, _) in ROUTES.items() if section == "cache")
"""The step cache's flat keys (docs/caching.md): the config's defaults, which a request may override."""


@attrs.frozen(kw_only=True)
class GenerationConfig:
    """A preset with overrides applied: one section per component, and where each key came from."""

    model: ModelSettings = attrs.field(factory=ModelSettings)
    denoiser: DenoiserSettings = attrs.field(factory=DenoiserSettings)
    text_encoder: TextEncoderSettings = attrs.field(factory=TextEncoderSettings)
    vae: VaeSettings = attrs.field(factory=VaeSettings)
    cache: CacheSettings = attrs.field(factory=CacheSettings)
    mesh: MeshSettings = attrs.field(factory=MeshSettings)
    startup: StartupSettings = attrs.field(factory=StartupSettings)
    sampling: SamplingDefaults = attrs.field(factory=SamplingDefaults)
    mode_options: ModeOptionDefaults = attrs.field(factory=ModeOptionDefaults)
    origins: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)
    """Where each key that is not at its generic default got its value (a preset, a checkpoint,
    --set)."""

    def __attrs_post_init__(self) -> None:
        try:
            check_sampler(self.sampling.sample_solver, self.sampling.sigma_schedule)
        except InvalidRequestError as err:
            raise ConfigError(str(err)) from None
        check_ring_attention(self.denoiser.attention, self.mesh.context_parallel, self.mesh.context)

    @staticmethod
    def keys() -> tuple[str, ...]:
        """Every flat key, section by section."""
        return tuple(ROUTES)

    def value(self, key: str) -> Any:
        """The value of flat `key`."""
        section, field = ROUTES[key]
        return getattr(getattr(self, section), field.name)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "config") -> GenerationConfig:
        """Builds a config from typed values (a parsed preset), rejecting unknown keys."""
        return cls().with_overrides(values, source=source)

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str = "--set") -> GenerationConfig:
        """A copy with `overrides` (flat keys) applied, each key's origin set to `source`; string
        values are parsed to the key's type."""
        typed = _typed(overrides, source)
        per_section: dict[str, dict[str, Any]] = {}
        for key, value in typed.items():
            section, field = ROUTES[key]
            per_section.setdefault(section, {})[field.name] = value
        try:
            sections = {name: attrs.evolve(getattr(self, name), **values) for name, values in per_section.items()}
        except InvalidRequestError as err:  # the cache section checks its keys together
            raise ConfigError(str(err)) from None
        return attrs.evolve(self, **sections, origins={**self.origins, **dict.fromkeys(typed, source)})

    def resolved(self, platform: str) -> GenerationConfig:
        """Every `auto` decided for `platform` ("cpu", "gpu", "tpu"): the engine dtype, attention
        and the VAE's convolution form by the platform, each component's dtype by the engine's."""
        model = resolved_model(self.model, platform)
        return attrs.evolve(
            self,
            model=model,
            denoiser=resolved_denoiser(self.denoiser, model.dtype, platform),
            text_encoder=resolved_text_encoder(self.text_encoder, model.dtype),
            vae=resolved_vae(self.vae, model.dtype, platform),
        )

    def origin(self, key: str) -> str:
        """Where `key`'s value came from: the source that last set it, else "default"."""
        return self.origins.get(key, "default")

    def describe(self, keys: tuple[str, ...] = ()) -> str:
        """One line per key (default: the sampling keys): its value and where it came from."""
        lines = [f"  {key:<22} {self.value(key)!r:<14} ({self.origin(key)})" for key in keys or SAMPLING_KEYS]
        return "\n".join(["settings (value, where from):", *lines])

    def request(self, prompt: str, **overrides: Any) -> GenerationRequest:
        """A request with this config's sampling defaults, mode options and step cache, overridden
        where given (None = default): request fields, mode inputs by name (`image=pixels`) and mode
        options by name (`strength=0.6`). The mode those select checks them (registry.check_request)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        names = {f.name for f in attrs.fields(GenerationRequest)} - {"inputs", "options"}
        options = attrs.asdict(self.mode_options, recurse=False)
        inputs = {name: given.pop(name) for name in input_names() & set(given)}
        chosen = {name: given.pop(name) for name in set(options) & set(given)}
        unknown = set(given) - names
        if unknown:
            known = sorted(names | input_names() | set(options))
            raise ConfigError(f"unknown request field(s) {sorted(unknown)}; known: {known}")
        sampling = attrs.asdict(self.sampling, recurse=False)
        values = {name: value for name, value in sampling.items() if name in names}
        values.update({"cache": self.cache, **given})
        try:
            request = GenerationRequest(
                prompt=prompt, **values, inputs=inputs, options=mode_options(inputs, {**options, **chosen})
            )
            check_request(request)
        except InvalidRequestError as err:
            message = self._with_origin(str(err), overrides)
            raise err if message == str(err) else InvalidRequestError(message) from None
        return request

    def with_cache(self, keys: Mapping[str, Any], *, source: str) -> CacheSettings:
        """This config's step cache with `keys` over it: flat cache keys (or their aliases), typed
        or as text, each parsed as `with_overrides` parses it; a ConfigError names a key that is no
        cache key, or a value its section refuses."""
        other = [key for key in keys if not is_cache_key(key)]
        if other:
            raise ConfigError(f"{source}: {other[0]!r} is not a step cache key; the cache keys are {', '.join(CACHE_KEYS)}")
        return self.with_overrides(keys, source=source).cache

    def _with_origin(self, message: str, overrides: Mapping[str, Any]) -> str:
        """`message` (which starts `key=value:`) with where the key's value came from, when a preset
        or checkpoint gave it."""
        key = message.partition("=")[0]
        if key in overrides or key not in ROUTES or self.origin(key) in ("default", "--set"):
            return message
        return f"{message} (from {self.origin(key)})"


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


def is_cache_key(name: str) -> bool:
    """Whether `name` is a step cache key, an alias of one or maxdiffusion's switch for a policy
    (which `with_overrides` refuses with the key to use instead)."""
    return ALIASES.get(name, name) in CACHE_KEYS or name in CACHE_SWITCHES


def cache_values(cache: CacheSettings) -> dict[str, Any]:
    """`cache` as flat keys, JSON values (lists for tuples): `cache_policy` and every key not at its
    generic default, which `GenerationConfig().with_cache` reads back as `cache`."""
    generic = CacheSettings()
    names = {key: ROUTES[key][1].name for key in CACHE_KEYS}
    changed = {key: getattr(cache, name) for key, name in names.items()
               if key == "cache_policy" or getattr(cache, name) != getattr(generic, name)}  # fmt: skip
    return {key: list(value) if isinstance(value, tuple) else value for key, value in changed.items()}


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
    _, field = ROUTES[key]
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
            return _whole(value)
        if kind is float:
            return _finite(value)
        if kind is tuple:
            return _items(value, field.metadata["item"])
        return value if isinstance(value, str) else str(value)
    except ValueError:
        name = f"comma-separated list of {field.metadata['item'].__name__}" if kind is tuple else kind.__name__
        form = "true or false" if kind is bool else "digits 0-9"
        raise ConfigError(f"{source}: {key}={shown(value)} is not a valid {name} ({form})") from None
    except ArithmeticError:
        raise ConfigError(f"{source}: {key}={shown(value)}: must be a finite number (no nan or inf)") from None


def _whole(value: Any) -> int:
    """An int from `value` (text in digits 0-9, or a whole number); ValueError otherwise."""
    if isinstance(value, str):
        return parse_whole(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError
    return int(value)


def _finite(value: Any) -> float:
    """A float from `value` (text in digits 0-9, or a number); ValueError for what is not a number,
    ArithmeticError for nan, inf and what is past a float's range."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text.lstrip("+-") in ("inf", "infinity", "nan"):
            raise ArithmeticError
        return parse_decimal(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError
    number = float(value)  # OverflowError (an ArithmeticError) for an int past a float's range
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
        parse = {float: _finite, int: _whole}.get(item, item)
        return tuple(parse(t) for t in texts if t != "")
    except TypeError:
        raise ValueError from None
