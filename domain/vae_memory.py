"""The memory plan's VAE terms: the transient of a decode or an encode, counted in the caches the
VAE's causal 3-frame convolutions carry from one temporal chunk to the next (each its input's last
two frames, all held together: 3.5 GiB at 832x480 for the Wan 2.1 decoder); a chunk's activations
are in proportion to the same widths. The multiples are XLA's buffer assignment of the published
Wan 2.1 and 2.2 VAEs at 832x480 and 1280x704 (tests/unit/test_vae_memory_plan.py), compiled as
wanjax compiles them (XLA's own convolutions on CPU), times the resident memory XLA:CPU holds over
its assignment; off CPU, times what an H200 held (tests/unit/test_vae_accelerator_plan.py)."""

from __future__ import annotations

import math

from wanjax.domain.sizes import DTYPE_BYTES
from wanjax.domain.specs import VaeSpec

VAE_CONTEXT_FRAMES = 2  # frames of its input a causal 3-frame convolution carries to the next chunk
# The decode's transient in multiples of its caches, held + per_frame x chunk (latent frames), by
# convolution form: XLA:CPU's buffer assignment of both published VAEs, chunks 1 and 2, within 15% of
# each (the per-frame form holds each tap's products of a chunk: more per frame than `3d`)
VAE_DECODE_CACHE_MULTIPLES = {"frames": (1.2, 1.3), "3d": (1.3, 0.8)}
VAE_ENCODE_CACHE_MULTIPLE = 4.15  # the same for the encode, per 4 pixel frames of a scanned chunk
VAE_ENCODE_UNROLLED_MULTIPLES = (1.05, 2.0)  # unrolled: held + per chunk of 4 pixel frames
# Resident over XLA's assignment on CPU (XLA's own convolutions keep their work inside it; YNNPACK's
# held 1.33-1.37x): 1.00-1.01 for the untiled decodes and encodes of both VAEs at 832x480x9, 1280x720x9
# and 1280x704x9; 1.04-1.05 for the tiled decodes and the Wan 2.1 decode at 416x240x9
VAE_DECODE_RESIDENT = 1.02
# A tiled decode's transient over the untiled plan of one tile, by convolution form, plus every tile's
# decoded output held for blending, about twice the video (diffusers' tiles overlap by a quarter each
# way): XLA:CPU's buffer assignment of both published VAEs at 832x480 and 1280x704, within 15% of each
# (the per-frame form's 1.36 fell to 1.04 once it skipped the first chunk's zero context; 1.08 of its
# larger untiled multiples with XLA's own convolutions, the Wan 2.1 and 2.2 decodes' resident growth
# at +9% and -13% of the plan, as their assignments at +14% and -5%)
VAE_TILED_MULTIPLES = {"frames": 1.08, "3d": 0.94}
VAE_TILE_OUTPUTS = 2.0
# Off CPU the device holds what XLA assigns (no CPU library's working memory beside it), but that is
# not the CPU-fitted assignment in the compute dtype: an H200 (JAX 0.11.2, bfloat16, `3d`) held
# these multiples of it (the plan without VAE_DECODE_RESIDENT), by VAE (Wan 2.2's residual layout or
# not), pass and tiling, at 832x480x81, 1280x720x81 and 1280x704x121 (docs/performance.md, "The VAE
# at real sizes"). The tiled encodes were not measured there: they take the untiled multiples.
VAE_ACCELERATOR_MULTIPLES = {  # (is_residual, pass, tiled)
    (False, "decode", False): 1.17, (False, "decode", True): 1.32,
    (True, "decode", False): 1.52, (True, "decode", True): 1.99,
    (False, "encode", False): 0.73, (False, "encode", True): 0.73,
    (True, "encode", False): 1.12, (True, "encode", True): 1.12,
}
# Those multiples reproduce each peak within 2% either way (three of seven 0.2% under); a plan under a
# device's peak refuses too late, so the plan holds 3% over them: 2.8-5.0% above every peak.
VAE_ACCELERATOR_MARGIN = 1.03


def vae_decode_bytes(
    vae: VaeSpec, pixels: int, latent_frames: int, chunk: int | None, tile: int | None,
    *, convolution: str = "frames", dtype: str = "float32", devices: int = 1, platform: str = "cpu",
) -> int:  # fmt: skip
    """The decode's transient on `platform` (on CPU, resident): the caches every causal convolution
    carries from one chunk to the next, and a chunk's activations, both in proportion to the caches
    (a tile's with tiling; None for `chunk` unrolls every latent frame into one program, which holds
    them all). Tiled (`tile` pixels a side, smaller than the video), by the `convolution` form, plus
    the tiles' outputs."""
    tiled = bool(tile) and pixels > tile**2
    chunk = latent_frames if chunk is None else min(chunk, latent_frames)
    channels = vae_decoder_cache_channels_per_pixel(vae)
    caches = VAE_CONTEXT_FRAMES * channels * (tile**2 if tiled else pixels) * DTYPE_BYTES[dtype] / devices
    held, per_frame = VAE_DECODE_CACHE_MULTIPLES[convolution]
    transient = (held + per_frame * chunk) * caches
    if tiled:
        frames = 1 + vae.temporal_compression * (latent_frames - 1)
        outputs = VAE_TILE_OUTPUTS * vae.out_channels // vae.patch**2 * pixels * frames * DTYPE_BYTES[dtype]
        transient = VAE_TILED_MULTIPLES[convolution] * transient + outputs
    return int(_held_over_assigned(vae, "decode", tiled, platform) * transient)


def _held_over_assigned(vae: VaeSpec, mode: str, tiled: bool, platform: str) -> float:
    """What `platform` holds over the VAE's CPU-fitted buffer assignment."""
    if platform == "cpu":
        return VAE_DECODE_RESIDENT
    return VAE_ACCELERATOR_MARGIN * VAE_ACCELERATOR_MULTIPLES[vae.is_residual, mode, tiled]


def vae_decoder_cache_channels_per_pixel(vae: VaeSpec) -> float:
    """Channels per output pixel of the inputs the decoder's causal 3-frame convolutions cache (each
    carries its input's last 2 frames): conv_in and the middle block's four at the latents'
    resolution, each level's residual blocks (two each) and temporal upsample, conv_out at the top.
    Level l (0 the coarsest) runs on 4**(l + 1 - levels) of the (patch) pixels. The Wan 2.1 VAE:
    1182, mostly the top level's seven 96-channel convolutions; the Wan 2.2 VAE: 892."""
    dims = [vae.decoder_dim * m for m in (vae.dim_mult[-1], *vae.dim_mult[::-1])]
    levels = len(vae.dim_mult)
    temporal = (*vae.temperal_downsample[::-1], False)
    total = (vae.z_dim + 4 * dims[0]) / 4 ** (levels - 1)
    for level, (i, o) in enumerate(zip(dims[:-1], dims[1:])):
        i = i // 2 if level > 0 and not vae.is_residual else i  # Wan 2.1: the upsample halved it
        cached = i + o + 2 * o * vae.num_res_blocks + o * temporal[level]
        total += cached / 4 ** (levels - 1 - level)
    return (total + dims[-1]) / vae.patch**2


def vae_encode_bytes(
    vae: VaeSpec, pixels: int, frames: int, chunk: int | None, tile: int | None,
    *, dtype: str = "float32", platform: str = "cpu",
) -> int:  # fmt: skip
    """The encode's transient on `platform` (on CPU, resident), in proportion to the encoder's caches:
    per 4 pixel frames of a scanned chunk, or (`chunk` None) held plus per chunk of 4 frames unrolled
    into one program. A tile's side counts patchified pixels (as diffusers cuts them): `patch` times
    as many pixels."""
    tile_pixels = (tile * vae.patch) ** 2 if tile else pixels
    tiled = pixels > tile_pixels
    pixels = min(pixels, tile_pixels)
    caches = VAE_CONTEXT_FRAMES * vae_encoder_cache_channels_per_pixel(vae) * pixels * DTYPE_BYTES[dtype]
    if chunk is None:
        held, per_chunk = VAE_ENCODE_UNROLLED_MULTIPLES
        multiple = held + per_chunk * math.ceil((frames - 1) / 4)
    else:
        multiple = VAE_ENCODE_CACHE_MULTIPLE * max(chunk // 4, 1)
    return int(_held_over_assigned(vae, "encode", tiled, platform) * multiple * caches)


def vae_encoder_cache_channels_per_pixel(vae: VaeSpec) -> float:
    """As `vae_decoder_cache_channels_per_pixel`, for the encoder: conv_in on the (patch) pixels, each
    level's residual blocks and the temporal downsample's one frame (half of two) at the level
    below, the middle block's four and conv_out at the latents' resolution. The Wan 2.1 VAE: 702."""
    dims = [vae.base_dim * m for m in (1, *vae.dim_mult)]
    levels = len(vae.dim_mult)
    total = vae.in_channels
    for level, (i, o) in enumerate(zip(dims[:-1], dims[1:])):
        total += (i + o + 2 * o * (vae.num_res_blocks - 1)) / 4**level
        if level < levels - 1 and vae.temperal_downsample[level]:
            total += o / 2 / 4 ** (level + 1)
    return (total + 5 * dims[-1] / 4 ** (levels - 1)) / vae.patch**2
