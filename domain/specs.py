"""Architecture specs of the Wan transformer and VAE, read from diffusers config.json files.

Specs hold architecture only: no dtype, mesh, kernel or scan choice (those are runtime
config). Field names follow diffusers' config keys so a config.json maps one to one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.s2v_spec import S2V_CONFIG_KEYS, S2VSpec

if TYPE_CHECKING:
    from wanjax.domain.extensions.base import ModelExtension


def _as_tuple(value: Any) -> Any:
    """A config.json list as a tuple (integers as int); anything else is kept for the checks to name."""
    if not isinstance(value, (list, tuple)):
        return value
    return tuple(int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v for v in value)


def _tuple_of_bools(value: Any) -> Any:
    return tuple(bool(v) for v in value) if isinstance(value, (list, tuple)) else value


def _is_count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_values(spec: Any, what: str, rules: Iterable[tuple[str, Any, str]]) -> None:
    """Config values as carefully as user input: (field, test, what it must be) each; a
    CheckpointError names the first that fails."""
    for name, test, must in rules:
        value = getattr(spec, name)
        if not test(value):
            raise CheckpointError(
                f"{what} config: {name}={value!r}: must be {must}; the file is corrupt or not a Wan {what} config"
            )


@contextmanager
def _named(source: str | None) -> Iterator[None]:
    """Errors about a config prefixed with where it came from (its path), when known."""
    try:
        yield
    except (CheckpointError, UnsupportedModelError) as err:
        if source is None:
            raise
        raise type(err)(f"{source}: {err}") from None


def _counts(*names: str, optional: bool = False) -> list[tuple[str, Any, str]]:
    if optional:
        return [(n, lambda v: v is None or _is_count(v), "null or a whole number >= 1") for n in names]
    return [(n, _is_count, "a whole number >= 1") for n in names]


def _are_hint_layers(value: Any, num_layers: Any) -> bool:
    """Block indices for VACE hints: ascending, the first 0, all below num_layers."""
    return (
        isinstance(value, tuple)
        and len(value) > 0
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and value[0] == 0
        and all(a < b for a, b in zip(value, value[1:]))
        and value[-1] < num_layers
    )


def _are_channel_sizes(value: Any) -> bool:
    """(resolution, channels) pairs of the motion encoder: powers of two from 4 up, each once."""
    return (
        isinstance(value, tuple)
        and len(value) > 0
        and all(isinstance(p, tuple) and len(p) == 2 and all(map(_is_count, p)) for p in value)
        and all(size >= 4 and size & (size - 1) == 0 for size, _ in value)
        and len({size for size, _ in value}) == len(value)
    )


def _channel_sizes(value: Any) -> Any:
    """diffusers' {"4": 512, ...} as sorted ((4, 512), ...): hashable, as a frozen spec needs."""
    if isinstance(value, Mapping):
        try:
            return tuple(sorted((int(size), int(channels)) for size, channels in value.items()))
        except (TypeError, ValueError):
            return value
    return _as_tuple(value) if not isinstance(value, tuple) else tuple(_as_tuple(p) for p in value)


ANIMATE_TRANSFORMER_CLASS = "WanAnimateTransformer3DModel"
ANIMATE_MOTION_CHANNEL_SIZES = (
    (4, 512), (8, 512), (16, 512), (32, 512), (64, 256), (128, 128), (256, 64), (512, 32), (1024, 16),
)  # fmt: skip
"""diffusers' WAN_ANIMATE_MOTION_ENCODER_CHANNEL_SIZES: the motion encoder's width per resolution."""
ANIMATE_TRANSFORMER_DEFAULTS = {"image_dim": 1280, "in_channels": 36}
"""WanAnimateTransformer3DModel's __init__ defaults that differ from the base transformer's."""


@attrs.frozen(kw_only=True)
class AnimateSpec:
    """What Wan 2.2 Animate (diffusers' WanAnimateTransformer3DModel) adds to a Wan 2.1
    image-to-video transformer: pose latents embedded and added to the video tokens after the
    reference frame; a face video through a motion encoder (a StyleGAN-like conv net to
    `motion_dim` coefficients of an orthogonalised basis, `motion_encoder_dim` wide) and a face
    encoder (causal temporal convs, `face_encoder_num_heads` token streams of the model width);
    and a face adapter (a per-frame cross-attention over those tokens) after every
    `inject_face_latents_blocks`-th block. Field names are diffusers' config keys."""

    motion_encoder_channel_sizes: tuple[tuple[int, int], ...] = attrs.field(
        default=ANIMATE_MOTION_CHANNEL_SIZES, converter=_channel_sizes
    )
    motion_encoder_size: int = 512
    motion_style_dim: int = 512
    motion_dim: int = 20
    motion_encoder_dim: int = 512
    face_encoder_hidden_dim: int = 1024
    face_encoder_num_heads: int = 4
    inject_face_latents_blocks: int = 5

    def __attrs_post_init__(self) -> None:
        _check_values(self, "transformer", [
            ("motion_encoder_channel_sizes", _are_channel_sizes,
             'a mapping from powers of two >= 4 to channel counts, e.g. {"4": 512, "8": 512}'),
            ("motion_encoder_size", lambda v: _is_count(v) and v >= 8 and v & (v - 1) == 0,
             "a power of two >= 8 (the face image's side)"),
            *_counts("motion_style_dim", "motion_dim", "motion_encoder_dim", "face_encoder_hidden_dim",
                     "face_encoder_num_heads", "inject_face_latents_blocks"),
        ])  # fmt: skip
        sizes = dict(self.motion_encoder_channel_sizes)
        needed = [2**k for k in range(2, int(math.log2(self.motion_encoder_size)) + 1)]
        if any(size not in sizes for size in needed):
            raise UnsupportedModelError(
                f"transformer config: motion_encoder_channel_sizes has resolutions {sorted(sizes)}, but a "
                f"motion_encoder_size={self.motion_encoder_size} encoder needs a width for each of {needed}"
            )

    def channels(self, size: int) -> int:
        """The motion encoder's width at resolution `size`."""
        return dict(self.motion_encoder_channel_sizes)[size]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AnimateSpec:
        """The fields of a WanAnimateTransformer3DModel config.json (its defaults for those it leaves out)."""
        fields = _known_fields(cls, config)
        if fields.get("motion_encoder_channel_sizes", 0) is None:
            del fields["motion_encoder_channel_sizes"]
        return cls(**fields)


VACE_TRANSFORMER_CLASS = "WanVACETransformer3DModel"
SKYREELS_V2_TRANSFORMER_CLASS = "SkyReelsV2Transformer3DModel"
"""SkyReels-V2's transformer: Wan 2.1's, with per-frame timesteps, frame-block-causal attention
(`num_frame_per_block`) and, where `inject_sample_info`, an fps embedding."""
VACE_DEFAULTS = {"vace_layers": (0, 5, 10, 15, 20, 25, 30, 35), "vace_in_channels": 96}
"""WanVACETransformer3DModel's __init__ defaults, for the keys its config.json leaves out."""


def _known_fields(cls: type, config: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in attrs.fields(cls)}
    return {k: v for k, v in config.items() if k in names}


@attrs.frozen(kw_only=True)
class TransformerSpec:
    """WanTransformer3DModel architecture: every Wan 2.1 / 2.2 transformer.

    The variants differ only in sizes and three optional fields. Wan 2.1 I2V sets
    `image_dim` (CLIP token width) and `added_kv_proj_dim` (= inner_dim): its
    cross-attention also attends over the embedded CLIP image tokens. FLF2V adds
    `pos_embed_seq_len`, a learnt position embedding over the first and last frames'
    image tokens. Wan 2.2 I2V and TI2V condition on the image through extra latent
    channels only (`in_channels`), so they set none of the three.
    """

    patch_size: tuple[int, int, int] = attrs.field(default=(1, 2, 2), converter=_as_tuple)
    num_attention_heads: int = 40
    attention_head_dim: int = 128
    in_channels: int = 16
    out_channels: int = 16
    text_dim: int = 4096
    freq_dim: int = 256
    ffn_dim: int = 13824
    num_layers: int = 40
    cross_attn_norm: bool = True
    qk_norm: str = "rms_norm_across_heads"
    eps: float = 1e-6
    rope_max_seq_len: int = 1024
    image_dim: int | None = None
    added_kv_proj_dim: int | None = None
    pos_embed_seq_len: int | None = None
    vace_layers: tuple[int, ...] | None = attrs.field(default=None, converter=_as_tuple)
    vace_in_channels: int | None = None
    animate: AnimateSpec | None = None
    num_frame_per_block: int | None = None
    """SkyReels-V2 (diffusers' SkyReelsV2Transformer3DModel, default 1): latent frames per causal
    block of its self-attention when it is more than 1; None for a Wan transformer. A model with it
    denoises each latent frame at its own noise level (Diffusion Forcing)."""
    inject_sample_info: bool = False
    """SkyReels-V2's fps embedding (two rows: 16 fps, other) added to the blocks' modulation."""
    s2v: S2VSpec | None = None

    def __attrs_post_init__(self) -> None:
        _check_values(self, "transformer", [
            ("patch_size", lambda v: isinstance(v, tuple) and len(v) == 3 and all(map(_is_count, v)),
             "three whole numbers >= 1, e.g. [1, 2, 2]"),
            *_counts("num_attention_heads", "in_channels", "out_channels", "text_dim", "freq_dim", "ffn_dim",
                     "num_layers", "rope_max_seq_len"),
            ("attention_head_dim", lambda v: _is_count(v) and v % 2 == 0, "an even whole number (RoPE rotates pairs)"),
            ("eps", lambda v: _is_number(v) and v > 0, "a number > 0"),
            ("cross_attn_norm", lambda v: isinstance(v, bool), "true or false"),
            *_counts("image_dim", "added_kv_proj_dim", "pos_embed_seq_len", "vace_in_channels", "num_frame_per_block",
                     optional=True),
            ("inject_sample_info", lambda v: isinstance(v, bool), "true or false"),
            ("vace_layers", lambda v: v is None or _are_hint_layers(v, self.num_layers),
             f"null or ascending block indices from 0 below num_layers={self.num_layers}, e.g. [0, 5, 10]"),
        ])  # fmt: skip
        if (self.vace_layers is None) != (self.vace_in_channels is None):
            raise UnsupportedModelError(
                f"transformer config sets vace_layers={self.vace_layers!r} and vace_in_channels="
                f"{self.vace_in_channels!r}: a Wan VACE transformer sets both, the others neither"
            )
        if (self.image_dim is None) != (self.added_kv_proj_dim is None):
            raise UnsupportedModelError(
                f"transformer config sets image_dim={self.image_dim!r} and added_kv_proj_dim="
                f"{self.added_kv_proj_dim!r}: Wan image-to-video transformers set both (the image "
                "embedder feeds the added K/V projections), the others neither"
            )
        if self.added_kv_proj_dim is not None and self.added_kv_proj_dim != self.inner_dim:
            raise UnsupportedModelError(
                f"transformer config sets added_kv_proj_dim={self.added_kv_proj_dim}; it must equal "
                f"num_attention_heads * attention_head_dim = {self.inner_dim}, the image embedder's width"
            )
        if self.pos_embed_seq_len is not None and self.image_dim is None:
            raise UnsupportedModelError(
                f"transformer config sets pos_embed_seq_len={self.pos_embed_seq_len} without image_dim; "
                "the position embedding belongs to the image embedder (Wan 2.1 FLF2V)"
            )

        if self.animate is not None:
            self._check_animate(self.animate)
        if self.s2v is not None and (self.image_dim is not None or self.is_vace or self.animate is not None):
            raise UnsupportedModelError(
                "transformer config: a Wan S2V transformer is a text-to-video one (no image_dim, VACE layers or "
                "Animate branch) with its own audio, motion and pose additions"
            )

    def _check_animate(self, animate: AnimateSpec) -> None:
        if self.image_dim is None or self.is_vace or self.pos_embed_seq_len is not None:
            raise UnsupportedModelError(
                "transformer config: a Wan Animate transformer is a Wan 2.1 image-to-video one (image_dim and "
                "added_kv_proj_dim set, no pos_embed_seq_len, no VACE layers)"
            )
        if self.in_channels != 2 * self.out_channels + 4:
            raise UnsupportedModelError(
                f"transformer config has in_channels={self.in_channels}, out_channels={self.out_channels}; a Wan "
                "Animate transformer takes noise, reference latents and a 4-channel mask: in_channels = "
                f"2 * out_channels + 4 = {2 * self.out_channels + 4}"
            )
        if self.num_layers % animate.inject_face_latents_blocks:
            raise UnsupportedModelError(
                f"transformer config: num_layers={self.num_layers} is not a multiple of inject_face_latents_blocks="
                f"{animate.inject_face_latents_blocks}; diffusers builds one face adapter per "
                "inject_face_latents_blocks blocks and needs one after each of blocks 0, k, 2k, ..."
            )

    @property
    def inner_dim(self) -> int:
        return self.num_attention_heads * self.attention_head_dim

    @property
    def uses_image_embeddings(self) -> bool:
        """Whether the cross-attention also attends over CLIP image embeddings (Wan 2.1 I2V, FLF2V)."""
        return self.image_dim is not None

    @property
    def extensions(self) -> tuple[ModelExtension, ...]:
        """The model extensions (domain/extensions/) a transformer of this spec has, in the
        registry's order: what it adds to the base model (I2V's image embedder, VACE's hint blocks,
        Animate's pose and face branch), each with its inputs and cost."""
        from wanjax.domain.extensions.registry import extensions_of  # the extensions read the spec

        return extensions_of(self)

    @property
    def diffusion_forcing(self) -> bool:
        """Whether each latent frame may carry its own timestep (SkyReels-V2's transformer)."""
        return self.num_frame_per_block is not None

    @property
    def is_vace(self) -> bool:
        """Whether the transformer has VACE blocks reading control latents (Wan 2.1 VACE)."""
        return self.vace_layers is not None

    @property
    def is_animate(self) -> bool:
        """Whether the transformer takes pose latents and a face video (Wan 2.2 Animate)."""
        return self.animate is not None

    @property
    def is_s2v(self) -> bool:
        """Whether the transformer takes speech, a reference image and motion latents (Wan 2.2 S2V)."""
        return self.s2v is not None

    @property
    def face_adapter_count(self) -> int:
        """How many face adapter blocks an Animate transformer has (0 for the others)."""
        return 0 if self.animate is None else self.num_layers // self.animate.inject_face_latents_blocks

    @classmethod
    def from_diffusers_config(cls, config: Mapping[str, Any], source: str | None = None) -> TransformerSpec:
        """The spec of a config.json's values; an error prefixed by `source` (its path) where one is wrong."""
        with _named(source):
            if config.get("qk_norm", "rms_norm_across_heads") != "rms_norm_across_heads":
                raise UnsupportedModelError(
                    f"transformer config has qk_norm={config['qk_norm']!r}; "
                    "supported: 'rms_norm_across_heads' (every published Wan checkpoint)."
                )
            if config.get("_class_name") == SKYREELS_V2_TRANSFORMER_CLASS:
                config = {"num_frame_per_block": 1, **config}
            if config.get("_class_name") == VACE_TRANSFORMER_CLASS:
                config = {**VACE_DEFAULTS, **config}
            if config.get("_class_name") == ANIMATE_TRANSFORMER_CLASS or "inject_face_latents_blocks" in config:
                config = {**ANIMATE_TRANSFORMER_DEFAULTS, **config}
                return cls(**_known_fields(cls, config), animate=AnimateSpec.from_config(config))
            if any(key in config for key in S2V_CONFIG_KEYS):
                return cls(**_known_fields(cls, config), s2v=S2VSpec.from_config(config))
            return cls(**_known_fields(cls, config))


WAN21_LATENTS_MEAN = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)  # fmt: skip
WAN21_LATENTS_STD = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)  # fmt: skip
# The Wan 2.2 VAE's statistics (Wan2.2-TI2V-5B-Diffusers vae/config.json).
WAN22_LATENTS_MEAN = (
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
    -0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
    -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
    -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
    0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
)  # fmt: skip
WAN22_LATENTS_STD = (
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
    0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
    0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
    0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
    0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
)  # fmt: skip


@attrs.frozen(kw_only=True)
class VaeSpec:
    """AutoencoderKLWan architecture: the Wan 2.1 VAE (the defaults) or the Wan 2.2 VAE.

    The Wan 2.2 VAE (`wan22()`) sets `is_residual` (down/up blocks with parameter-free
    space/time-to-channel shortcuts), `patch_size` 2 (2x2 pixels folded into channels
    before the encoder and unfolded after the decoder, hence 12 in/out channels) and a
    wider decoder (`decoder_base_dim`). diffusers' `clip_output` key is not read:
    diffusers clamps decoded video to [-1, 1] whatever it says, and so does wanjax.
    """

    base_dim: int = 96
    decoder_base_dim: int | None = None
    z_dim: int = 16
    dim_mult: tuple[int, ...] = attrs.field(default=(1, 2, 4, 4), converter=_as_tuple)
    num_res_blocks: int = 2
    attn_scales: tuple[float, ...] = attrs.field(default=(), converter=_as_tuple)
    temperal_downsample: tuple[bool, ...] = attrs.field(default=(False, True, True), converter=_tuple_of_bools)
    latents_mean: tuple[float, ...] = attrs.field(default=WAN21_LATENTS_MEAN, converter=_as_tuple)
    latents_std: tuple[float, ...] = attrs.field(default=WAN21_LATENTS_STD, converter=_as_tuple)
    is_residual: bool = False
    in_channels: int = 3
    out_channels: int = 3
    patch_size: int | None = None

    def __attrs_post_init__(self) -> None:
        _check_values(self, "vae", [
            *_counts("base_dim", "z_dim", "num_res_blocks", "in_channels", "out_channels"),
            *_counts("decoder_base_dim", "patch_size", optional=True),
            ("dim_mult", lambda v: isinstance(v, tuple) and len(v) > 0 and all(map(_is_count, v)),
             "a list of whole numbers >= 1, e.g. [1, 2, 4, 4]"),
            ("temperal_downsample", lambda v: isinstance(v, tuple) and len(v) == len(self.dim_mult) - 1,
             f"a list of {len(self.dim_mult) - 1} true/false values, one per downsampling stage (dim_mult has "
             f"{len(self.dim_mult)} entries)"),
            ("attn_scales", lambda v: isinstance(v, tuple), "a list"),
            ("latents_mean", lambda v: isinstance(v, tuple) and all(map(_is_number, v)), "a list of finite numbers"),
            ("latents_std", lambda v: isinstance(v, tuple) and all(_is_number(x) and x > 0 for x in v),
             "a list of finite numbers > 0 (latents are divided by them)"),
        ])  # fmt: skip
        if not len(self.latents_mean) == len(self.latents_std) == self.z_dim:
            raise UnsupportedModelError(
                f"vae config has {len(self.latents_mean)} latents_mean and {len(self.latents_std)} "
                f"latents_std values for z_dim={self.z_dim}; each needs exactly z_dim values"
            )
        if self.attn_scales:
            raise UnsupportedModelError(
                f"vae config sets attn_scales={list(self.attn_scales)}; no released Wan VAE uses "
                "attention at those scales and it is not supported: use attn_scales []"
            )
        rgb = 3 * self.patch**2
        if self.in_channels != rgb or self.out_channels != rgb:
            raise UnsupportedModelError(
                f"vae config has in_channels={self.in_channels}, out_channels={self.out_channels} with "
                f"patch_size={self.patch_size}; RGB video folded by the patch needs {rgb} each"
            )

    @classmethod
    def wan22(cls) -> VaeSpec:
        """The released Wan 2.2 VAE (TI2V-5B): z_dim 48, 16x spatial compression."""
        return cls(
            base_dim=160, decoder_base_dim=256, z_dim=48, is_residual=True, patch_size=2,
            in_channels=12, out_channels=12, latents_mean=WAN22_LATENTS_MEAN, latents_std=WAN22_LATENTS_STD,
        )  # fmt: skip

    @property
    def patch(self) -> int:
        """Pixels per side folded into channels (1: no patchify)."""
        return self.patch_size or 1

    @property
    def decoder_dim(self) -> int:
        return self.decoder_base_dim or self.base_dim

    @property
    def temporal_compression(self) -> int:
        return 2 ** sum(self.temperal_downsample)

    @property
    def spatial_compression(self) -> int:
        """Pixels per latent along H and W: the VAE's downsampling times the patch."""
        return 2 ** (len(self.dim_mult) - 1) * self.patch

    @classmethod
    def from_diffusers_config(cls, config: Mapping[str, Any], source: str | None = None) -> VaeSpec:
        """The spec of a config.json's values; an error prefixed by `source` (its path) where one is wrong."""
        with _named(source):
            spec = cls(**_known_fields(cls, config))
            for key, derived in (
                ("scale_factor_spatial", spec.spatial_compression),
                ("scale_factor_temporal", spec.temporal_compression),
            ):
                if config.get(key) is not None and config[key] != derived:
                    raise UnsupportedModelError(
                        f"vae config has {key}={config[key]}, but its architecture compresses by "
                        f"{derived}; check dim_mult, temperal_downsample and patch_size"
                    )
            return spec
