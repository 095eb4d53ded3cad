"""Architecture specs of the Wan transformer and VAE, read from diffusers config.json files.

Specs hold architecture only: no dtype, mesh, kernel or scan choice (those are runtime
config). Field names follow diffusers' config keys so a config.json maps one to one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.errors import UnsupportedModelError


def _tuple_of_ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


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

    patch_size: tuple[int, int, int] = attrs.field(default=(1, 2, 2), converter=_tuple_of_ints)
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

    def __attrs_post_init__(self) -> None:
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

    @property
    def inner_dim(self) -> int:
        return self.num_attention_heads * self.attention_head_dim

    @property
    def uses_image_embeddings(self) -> bool:
        """Whether the cross-attention also attends over CLIP image embeddings (Wan 2.1 I2V, FLF2V)."""
        return self.image_dim is not None

    @classmethod
    def from_diffusers_config(cls, config: Mapping[str, Any]) -> TransformerSpec:
        if config.get("qk_norm", "rms_norm_across_heads") != "rms_norm_across_heads":
            raise UnsupportedModelError(
                f"transformer config has qk_norm={config['qk_norm']!r}; "
                "supported: 'rms_norm_across_heads' (every published Wan checkpoint)."
            )
        return cls(**_known_fields(cls, config))


WAN21_LATENTS_MEAN = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)  # fmt: skip
WAN21_LATENTS_STD = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)  # fmt: skip


@attrs.frozen(kw_only=True)
class VaeSpec:
    """AutoencoderKLWan architecture (the Wan 2.1 VAE, z_dim 16)."""

    base_dim: int = 96
    z_dim: int = 16
    dim_mult: tuple[int, ...] = attrs.field(default=(1, 2, 4, 4), converter=_tuple_of_ints)
    num_res_blocks: int = 2
    attn_scales: tuple[float, ...] = attrs.field(default=(), converter=tuple)
    temperal_downsample: tuple[bool, ...] = attrs.field(
        default=(False, True, True), converter=lambda v: tuple(bool(x) for x in v)
    )
    latents_mean: tuple[float, ...] = attrs.field(default=WAN21_LATENTS_MEAN, converter=tuple)
    latents_std: tuple[float, ...] = attrs.field(default=WAN21_LATENTS_STD, converter=tuple)

    def __attrs_post_init__(self) -> None:
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

    @property
    def temporal_compression(self) -> int:
        return 2 ** sum(self.temperal_downsample)

    @property
    def spatial_compression(self) -> int:
        return 2 ** (len(self.dim_mult) - 1)

    @classmethod
    def from_diffusers_config(cls, config: Mapping[str, Any]) -> VaeSpec:
        if config.get("is_residual") or config.get("patch_size") not in (None, 1):
            raise UnsupportedModelError(
                "vae config describes the Wan 2.2 VAE (is_residual / patch_size); "
                "only the Wan 2.1 VAE (z_dim 16) is supported yet."
            )
        return cls(**_known_fields(cls, config))
