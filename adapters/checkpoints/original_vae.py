"""The Wan VAEs in their original names (`Wan2.1_VAE.pth`, `Wan2.2_VAE.pth`, ComfyUI's
`wan_2.1_vae.safetensors`) seen under diffusers' names, and their architecture read from
the tensor shapes (the official files come with no config).

The original modules are `nn.Sequential`s: a residual block is `residual.{0,2,3,6}` (norm,
conv, norm, conv) plus `shortcut`; the middle is `middle.{0,1,2}` (resnet, attention,
resnet); the head is `head.{0,2}` (norm, conv). Wan 2.1 lists each side's blocks in one
flat `downsamples` / `upsamples` sequence, resamples between the levels; Wan 2.2 nests one
sequence per level (`downsamples.L.downsamples.i`). Diffusers (and wanjax) group the
decoder's blocks by level, so a flat decoder index becomes (level, position), found by
walking the sequence: a resample ends a level. Facts from the official `wan/modules/
vae2_1.py`, `vae2_2.py` and diffusers' `convert_wan_vae_to_diffusers`; the mapping is ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from wanjax.adapters.checkpoints.pth_file import PthWeights
from wanjax.adapters.checkpoints.weights import ComponentWeights, RenamedWeights, open_weights
from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.specs import (
    WAN21_LATENTS_MEAN,
    WAN21_LATENTS_STD,
    WAN22_LATENTS_MEAN,
    WAN22_LATENTS_STD,
    VaeSpec,
)

RESIDUAL = {
    "residual.0.gamma": "norm1.gamma",
    "residual.2.weight": "conv1.weight",
    "residual.2.bias": "conv1.bias",
    "residual.3.gamma": "norm2.gamma",
    "residual.6.weight": "conv2.weight",
    "residual.6.bias": "conv2.bias",
    "shortcut.weight": "conv_shortcut.weight",
    "shortcut.bias": "conv_shortcut.bias",
}
SIDE = {"conv1.": "conv_in.", "head.0.": "norm_out.", "head.2.": "conv_out.", "middle.1.": "mid_block.attentions.0."}
MIDDLE_RESNETS = {"0": "0", "2": "1"}  # middle.{0,2} -> mid_block.resnets.{0,1}
TOP = {"conv1.": "quant_conv.", "conv2.": "post_quant_conv."}
# The statistics the official wrappers (Wan2_1_VAE, Wan2_2_VAE) normalise latents with, by z_dim.
LATENT_STATISTICS = {16: (WAN21_LATENTS_MEAN, WAN21_LATENTS_STD), 48: (WAN22_LATENTS_MEAN, WAN22_LATENTS_STD)}

_MIDDLE = re.compile(r"(encoder|decoder)\.middle\.([02])\.(.+)")
_FLAT = re.compile(r"(encoder\.downsamples|decoder\.upsamples)\.(\d+)\.(.+)")
_NESTED = re.compile(r"(encoder\.downsamples|decoder\.upsamples)\.(\d+)\.(?:downsamples|upsamples)\.(\d+)\.(.+)")
_RESAMPLE = ("resample.", "time_conv.")
_NESTED_FIRST = "encoder.down_blocks.0.resnets.0.conv1.weight"  # only Wan 2.2 groups levels


def is_original_vae(names: Iterable[str]) -> bool:
    return any(name.startswith(("encoder.downsamples.", "encoder.head.")) for name in names)


def vae_weights(location: Path) -> ComponentWeights | PthWeights | RenamedWeights:
    """A VAE's tensors under diffusers names from a diffusers `vae/` folder or a file (`.pth`,
    `.safetensors`) in either naming."""
    weights = open_weights(location)
    return RenamedWeights(weights, diffusers_vae_names(weights)) if is_original_vae(weights) else weights


def diffusers_vae_names(names: Iterable[str]) -> dict[str, str]:
    """Original name -> diffusers name, for every one of a VAE's `names`."""
    names = list(names)
    decoder_levels = _flat_decoder_positions(names)
    return {name: _diffusers_name(name, decoder_levels) for name in names}


def _diffusers_name(original: str, decoder_levels: dict[int, tuple[int, int]]) -> str:
    """Unknown names come back unchanged; the VAE loader reports them as unexpected."""
    nested = _NESTED.fullmatch(original)
    if nested:
        side, level, position, inner = nested.groups()
        return _block_name(side, int(level), int(position), inner, nested=True)
    flat = _FLAT.fullmatch(original)
    if flat:
        side, index, inner = flat.groups()
        if side == "encoder.downsamples":  # diffusers keeps the encoder's flat list
            return f"encoder.down_blocks.{index}.{RESIDUAL.get(inner, inner)}"
        level, position = decoder_levels[int(index)]
        return _block_name(side, level, position, inner, nested=False)
    middle = _MIDDLE.fullmatch(original)
    if middle:
        side, index, inner = middle.groups()
        return f"{side}.mid_block.resnets.{MIDDLE_RESNETS[index]}.{RESIDUAL.get(inner, inner)}"
    for side in ("encoder.", "decoder."):
        for old, new in SIDE.items():
            if original.startswith(side + old):
                return side + new + original[len(side + old) :]
    for old, new in TOP.items():
        if original.startswith(old):
            return new + original[len(old) :]
    return original


def _block_name(side: str, level: int, position: int, inner: str, *, nested: bool) -> str:
    blocks = "encoder.down_blocks" if side == "encoder.downsamples" else "decoder.up_blocks"
    if not inner.startswith(_RESAMPLE):
        return f"{blocks}.{level}.resnets.{position}.{RESIDUAL.get(inner, inner)}"
    if side == "encoder.downsamples":
        return f"{blocks}.{level}.downsampler.{inner}"
    return f"{blocks}.{level}.{'upsampler' if nested else 'upsamplers.0'}.{inner}"


def _flat_decoder_positions(names: Iterable[str]) -> dict[int, tuple[int, int]]:
    """Wan 2.1's flat decoder index -> (level, position in the level): a resample ends a level."""
    kinds: dict[int, bool] = {}  # index -> is a resample
    for name in names:
        match = _FLAT.fullmatch(name)
        if match and match[1] == "decoder.upsamples" and not _NESTED.fullmatch(name):
            kinds[int(match[2])] = kinds.get(int(match[2]), False) or match[3].startswith(_RESAMPLE)
    positions, level, position = {}, 0, 0
    for index in sorted(kinds):
        positions[index] = (level, position)
        level, position = (level + 1, 0) if kinds[index] else (level, position + 1)
    return positions


def vae_spec_of(tensors: Mapping[str, np.ndarray], where: str) -> VaeSpec:
    """The architecture of diffusers-named VAE tensors, from their shapes alone; `where` names
    the file for errors. The latent statistics are the released ones of its z_dim."""
    base, in_channels = _shape(tensors, "encoder.conv_in.weight", where)[:2]
    z_dim = _shape(tensors, "post_quant_conv.weight", where)[0]
    levels = _encoder_levels(tensors, where)
    res_blocks = {count for _, count, _ in levels}
    if len(res_blocks) != 1:
        raise UnsupportedModelError(f"{where}: encoder levels of {sorted(res_blocks)} residual blocks; not a Wan VAE")
    if z_dim not in LATENT_STATISTICS:
        raise UnsupportedModelError(
            f"{where}: a VAE with z_dim={z_dim}; the Wan VAEs have 16 (Wan 2.1) or 48 (Wan 2.2) latent channels"
        )
    dim_mult = tuple(width // base for width, _, _ in levels)
    decoder_dim = _shape(tensors, "decoder.conv_in.weight", where)[0] // dim_mult[-1]
    patch = round((in_channels / 3) ** 0.5)
    mean, std = LATENT_STATISTICS[z_dim]
    return VaeSpec(
        base_dim=base, decoder_base_dim=None if decoder_dim == base else decoder_dim, z_dim=z_dim,
        dim_mult=dim_mult, num_res_blocks=res_blocks.pop(),
        temperal_downsample=tuple(temporal for _, _, temporal in levels[:-1]),
        latents_mean=mean, latents_std=std, is_residual=_NESTED_FIRST in tensors,
        in_channels=in_channels, out_channels=_shape(tensors, "decoder.conv_out.weight", where)[0],
        patch_size=None if patch == 1 else patch,
    )  # fmt: skip


def _encoder_levels(tensors: Mapping[str, np.ndarray], where: str) -> list[tuple[int, int, bool]]:
    """Per encoder level: (output width, residual blocks, whether its downsample is temporal)."""
    levels: list[tuple[int, int, bool]] = []
    if _NESTED_FIRST in tensors:  # Wan 2.2: one block per level
        while f"encoder.down_blocks.{len(levels)}.resnets.0.conv1.weight" in tensors:
            prefix = f"encoder.down_blocks.{len(levels)}."
            count = sum(1 for name in tensors if re.fullmatch(re.escape(prefix) + r"resnets\.\d+\.conv1\.weight", name))
            width = _shape(tensors, prefix + "resnets.0.conv1.weight", where)[0]
            levels.append((width, count, prefix + "downsampler.time_conv.weight" in tensors))
        return levels
    width, count, index = 0, 0, 0  # Wan 2.1: resnets and resamples in one list
    while any(name.startswith(f"encoder.down_blocks.{index}.") for name in tensors):
        prefix = f"encoder.down_blocks.{index}."
        if prefix + "resample.1.weight" in tensors:
            levels.append((width, count, prefix + "time_conv.weight" in tensors))
            count = 0
        else:
            width = width if count else _shape(tensors, prefix + "conv1.weight", where)[0]
            count += 1
        index += 1
    levels.append((width, count, False))
    return levels


def _shape(tensors: Mapping[str, np.ndarray], name: str, where: str) -> tuple[int, ...]:
    if name not in tensors:
        raise CheckpointError(f"{where}: has no VAE tensor {name!r}; is it a Wan 2.1 or 2.2 VAE?")
    return tuple(tensors[name].shape)
