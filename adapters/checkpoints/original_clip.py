"""Wan 2.1 I2V's open-clip file (`models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`):
its vision tower under the names of transformers' `CLIPVisionModel`, and that model's config.

The file holds the whole XLM-RoBERTa CLIP (`visual.*`, `textual.*`, `log_scale`); Wan
reads image features only, the vision transformer's output before its last block, so
`textual.*`, `log_scale` and the pooled-output `visual.head` are dropped. The official
`VisionTransformer` (wan/modules/clip.py; wan/modules/animate/clip.py in Wan 2.2) is a
pre-norm ViT with exact GELU, a class token, one fused `to_qkv` projection (q, k, v
stacked in that order along its output) and no patch-embedding bias: transformers' CLIP
vision model with q, k, v split. The head count is not in the file: ViT-H/14 has 16.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from wanjax.domain.errors import CheckpointError

LAYER = {
    "norm1": "layer_norm1",
    "norm2": "layer_norm2",
    "attn.proj": "self_attn.out_proj",
    "mlp.0": "mlp.fc1",
    "mlp.2": "mlp.fc2",
}
TOP = {
    "visual.patch_embedding.weight": "embeddings.patch_embedding.weight",
    "visual.pre_norm.weight": "pre_layrnorm.weight",
    "visual.pre_norm.bias": "pre_layrnorm.bias",
    "visual.post_norm.weight": "post_layernorm.weight",
    "visual.post_norm.bias": "post_layernorm.bias",
}
DROPPED = ("textual.", "log_scale", "visual.head")
HEADS = 16  # open-clip ViT-H/14 (clip_xlm_roberta_vit_h_14: vision_heads=16)
TRANSFORMERS_PREFIX = "vision_model."  # a saved CLIPVisionModel's names (transformers < 5)
_LAYER = re.compile(r"visual\.transformer\.(\d+)\.(.+)\.(weight|bias)")


def clip_vision_tensors(weights: Mapping[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """The vision tower's tensors under `CLIPVisionModel` names (without `vision_model.`), from
    the open-clip names or transformers' own; unknown names are kept, for the loader to report."""
    if not any(name.startswith("visual.") for name in weights):
        return {name.removeprefix(TRANSFORMERS_PREFIX): weights[name] for name in weights}
    tensors: dict[str, np.ndarray] = {}
    for name in weights:
        if name.startswith(DROPPED):
            continue
        layer = _LAYER.fullmatch(name)
        if layer and layer[2] == "attn.to_qkv":
            prefix = f"encoder.layers.{layer[1]}.self_attn"
            q, k, v = np.split(weights[name], 3, axis=0)  # views: [3 D, ...] -> 3 x [D, ...]
            tensors.update({f"{prefix}.{p}_proj.{layer[3]}": t for p, t in zip("qkv", (q, k, v))})
        elif layer and layer[2] in LAYER:
            tensors[f"encoder.layers.{layer[1]}.{LAYER[layer[2]]}.{layer[3]}"] = weights[name]
        elif name == "visual.cls_embedding":  # [1, 1, D] -> [D]
            tensors["embeddings.class_embedding"] = weights[name].reshape(-1)
        elif name == "visual.pos_embedding":  # [1, 1 + P, D] -> [1 + P, D]
            tensors["embeddings.position_embedding.weight"] = weights[name][0]
        else:
            tensors[TOP.get(name, name)] = weights[name]
    if "embeddings.patch_embedding.weight" not in tensors:
        raise CheckpointError(f"{where}: no visual.patch_embedding.weight; not Wan's open-clip CLIP file")
    return tensors


def clip_vision_config(tensors: Mapping[str, np.ndarray], where: str) -> dict[str, Any]:
    """`CLIPVisionConfig` arguments of `CLIPVisionModel`-named tensors, from their shapes."""
    needed = (
        "embeddings.patch_embedding.weight", "embeddings.position_embedding.weight", "encoder.layers.0.mlp.fc1.weight",
    )  # fmt: skip
    missing = [name for name in needed if name not in tensors]
    if missing:
        raise CheckpointError(f"{where}: no tensors {missing}; not a CLIP vision encoder")
    hidden, _, patch, _ = tensors["embeddings.patch_embedding.weight"].shape
    grid = math.isqrt(tensors["embeddings.position_embedding.weight"].shape[0] - 1)  # patches per side
    layers = len({int(m[1]) for name in tensors if (m := re.match(r"encoder\.layers\.(\d+)\.", name))})
    return dict(
        hidden_size=hidden, intermediate_size=tensors["encoder.layers.0.mlp.fc1.weight"].shape[0],
        num_hidden_layers=layers, num_attention_heads=HEADS, image_size=grid * patch, patch_size=patch,
        hidden_act="gelu", layer_norm_eps=1e-5,
    )  # fmt: skip
