"""Original Wan tensor names (the Wan repos' and ComfyUI's safetensors) <-> diffusers names.

The original checkpoints hold the same tensors in the same torch layouts as diffusers'
`WanTransformer3DModel`, only named after the original modules (`self_attn.q`,
`ffn.0`, `modulation`, `head.head`, ...), sometimes under a `model.diffusion_model.`
prefix (ComfyUI). The one table of that difference is `adapters/checkpoints/wan_names.py`, which
LoRA keys in the original style need too; it follows diffusers'
`convert_wan_transformer_to_diffusers` (including its norm2/norm3 swap: the original
`norm3` is the affine cross-attention norm diffusers calls `norm2`). Wan 2.2 Animate's
additions (motion encoder, face encoder, face adapters) have a table of their own,
`original_animate.py`, some of them read reshaped or split.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from wanjax.adapters.checkpoints.gguf_file import SUFFIX as GGUF_SUFFIX
from wanjax.adapters.checkpoints.gguf_file import GgufWeights
from wanjax.adapters.checkpoints.scaled_fp8 import ScaledFp8Weights, is_scaled_fp8
from wanjax.adapters.checkpoints.original_animate import animate_names, is_animate_name
from wanjax.adapters.checkpoints.weights import ComponentWeights, RenamedWeights
from wanjax.adapters.checkpoints.wan_names import diffusers_module, diffusers_parameter

PREFIXES = ("model.diffusion_model.", "diffusion_model.")
MARKER = "head.modulation"  # the key diffusers' single-file loader detects Wan by
LEAVES = (".weight", ".bias")


def diffusers_name(original: str) -> str:
    """The diffusers name of an original Wan tensor name; unknown names come back unprefixed
    but otherwise unchanged (the loader then reports them as unexpected)."""
    for prefix in PREFIXES:
        if original.startswith(prefix):
            original = original[len(prefix) :]
            break
    parameter = diffusers_parameter(original)
    if parameter is not None:
        return parameter
    for leaf in LEAVES:
        module = diffusers_module(original[: -len(leaf)]) if original.endswith(leaf) else None
        if module is not None:
            return module + leaf
    return original


def is_original_format(names: Iterable[str]) -> bool:
    return any(name.endswith(MARKER) for name in names)


def transformer_weights(location: Path) -> ComponentWeights | GgufWeights | RenamedWeights:
    """A transformer's weights under diffusers names, whichever naming its files use.

    `location`: a folder, a `.safetensors` file, a shard index or a `.gguf` file. ComfyUI's and
    kijai's "scaled fp8" files (per-tensor scales in `*.scale_weight`) are read through
    `scaled_fp8.ScaledFp8Weights`.
    """
    weights = GgufWeights(location) if Path(location).suffix == GGUF_SUFFIX else ComponentWeights(location)
    if not is_original_format(weights):
        return weights
    return diffusers_named(ScaledFp8Weights(weights, location) if is_scaled_fp8(weights) else weights)


def diffusers_named(weights: Mapping[str, np.ndarray]) -> RenamedWeights:
    """Original-format transformer tensors (Wan 2.2 Animate's included) under diffusers names."""
    animate, views = animate_names(weights)
    rename = {name: diffusers_name(name) for name in weights if not is_animate_name(name)}
    return RenamedWeights(weights, {**rename, **animate}, views)
