"""How the JAX Wan VAE runs (dtypes, precision, chunking, tiling), kept apart from its architecture."""

from __future__ import annotations

from typing import Any

import attrs
import jax
import jax.numpy as jnp

from wanjax.domain.errors import ConfigError
from wanjax.domain.settings import AUTO, VAE_CONVOLUTIONS, VaeSettings

DEFAULTS = VaeSettings()  # the config's defaults are this runtime's
CONVOLUTIONS = tuple(form for form in VAE_CONVOLUTIONS if form != AUTO)  # as resolved for a platform


def _positive(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{attribute.name}={value}: must be a positive number of pixels")


@attrs.frozen(kw_only=True)
class VaeTiling:
    """Spatial tiling of decode and encode, in output-video pixels, as diffusers' `enable_tiling`.

    Tiles of `tile_sample_min_*` pixels start every `tile_sample_stride_*` pixels; the
    `min - stride` pixels two neighbours share are blended linearly. Defaults are
    diffusers' (256 / 192). Tiling applies only to inputs larger than one tile, and the
    sizes are floored to whole latents exactly as diffusers does, so results match its
    tiled decode and encode.
    """

    tile_sample_min_height: int = attrs.field(default=DEFAULTS.tile_size, validator=_positive)
    tile_sample_min_width: int = attrs.field(default=DEFAULTS.tile_size, validator=_positive)
    tile_sample_stride_height: int = attrs.field(default=DEFAULTS.tile_stride, validator=_positive)
    tile_sample_stride_width: int = attrs.field(default=DEFAULTS.tile_stride, validator=_positive)

    def __attrs_post_init__(self) -> None:
        for axis in ("height", "width"):
            tile, stride = getattr(self, f"tile_sample_min_{axis}"), getattr(self, f"tile_sample_stride_{axis}")
            if stride > tile:
                raise ConfigError(
                    f"tile_sample_stride_{axis}={stride} exceeds tile_sample_min_{axis}={tile}: "
                    "tiles would leave gaps; use a stride no larger than the tile"
                )


def _chunk(instance: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{attribute.name}={value}: use a positive number of frames, or None")


def _convolution(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in CONVOLUTIONS:
        raise ConfigError(f"{attribute.name}={value!r}: use one of {', '.join(CONVOLUTIONS)}")


@attrs.frozen(kw_only=True)
class VaeRuntime:
    """Runtime choices of the VAE; the architecture lives in `VaeSpec`.

    dtype: activations and the dtype convolutions run in.
    param_dtype: how weights are stored (checkpoint tensors are cast to it on load).
    precision: `jax.lax.Precision` of convolutions and attention matmuls. None is the
        backend default, which on recent NVIDIA GPUs means TF32 for float32 inputs
        (torch on CPU is full float32); use HIGHEST for bit-for-bit-minded parity runs.
    decode_chunk: latent frames per step of one `lax.scan` over time (after the first
        latent frame, which always runs alone). None unrolls diffusers' schedule (one
        latent frame per step) into the program, whose size then grows with the frame
        count; an int keeps one step body whatever the frame count. Larger chunks use
        the hardware better and need more memory.
    encode_chunk: pixel frames per scan step of encoding (after the first frame); a
        multiple of the temporal compression (4). None unrolls diffusers' schedule of 4.
    convolution: "3d" runs each 3-D convolution as one; "frames" as a 2-D convolution of
        every frame per time tap of the kernel, summed (the same sums, regrouped: float32
        results differ in the last bits), skipping the taps that read a first chunk's zero
        context, with each upsample's 3x3 convolution as four 2x2 ones of its input
        (`Conv2d.upsampled`). The builder picks "frames" on CPU.
    tiling: spatial tiling of decode and encode (diffusers' `enable_tiling`); None
        processes whole frames.
    """

    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: jax.lax.Precision | None = None
    decode_chunk: int | None = attrs.field(default=DEFAULTS.decode_chunk, validator=_chunk)
    encode_chunk: int | None = attrs.field(default=DEFAULTS.encode_chunk, validator=_chunk)
    convolution: str = attrs.field(default="3d", validator=_convolution)
    tiling: VaeTiling | None = None
