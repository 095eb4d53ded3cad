"""The original Wan (and ComfyUI, LightX2V, Lightning) parameter names -> diffusers names, for
checkpoints and LoRAs alike.

The one table of the naming difference. Checked against diffusers'
`scripts/convert_wan_to_diffusers.py` (TRANSFORMER_KEYS_RENAME_DICT, which renames the
original checkpoints) and `loaders/lora_conversion_utils.py`
(`_convert_non_diffusers_wan_lora_to_diffusers`, which renames original-style LoRAs);
`tests/unit/test_lora_names.py` runs the latter against this table.
"""

from __future__ import annotations

import re

# Under `blocks.N.`: original module -> diffusers module (LoRA deltas go to `.weight` / `.bias`).
BLOCK_MODULES = {
    "self_attn.q": "attn1.to_q",
    "self_attn.k": "attn1.to_k",
    "self_attn.v": "attn1.to_v",
    "self_attn.o": "attn1.to_out.0",
    "self_attn.norm_q": "attn1.norm_q",
    "self_attn.norm_k": "attn1.norm_k",
    "cross_attn.q": "attn2.to_q",
    "cross_attn.k": "attn2.to_k",
    "cross_attn.v": "attn2.to_v",
    "cross_attn.o": "attn2.to_out.0",
    "cross_attn.norm_q": "attn2.norm_q",
    "cross_attn.norm_k": "attn2.norm_k",
    "cross_attn.k_img": "attn2.add_k_proj",  # Wan 2.1 I2V image cross-attention
    "cross_attn.v_img": "attn2.add_v_proj",
    "cross_attn.norm_k_img": "attn2.norm_added_k",
    "norm3": "norm2",  # the cross-attention norm: the original runs norm1, norm3, norm2
    "ffn.0": "ffn.net.0.proj",
    "ffn.2": "ffn.net.2",
}
TOP_MODULES = {
    "patch_embedding": "patch_embedding",
    "text_embedding.0": "condition_embedder.text_embedder.linear_1",
    "text_embedding.2": "condition_embedder.text_embedder.linear_2",
    "time_embedding.0": "condition_embedder.time_embedder.linear_1",
    "time_embedding.2": "condition_embedder.time_embedder.linear_2",
    "time_projection.1": "condition_embedder.time_proj",
    "head.head": "proj_out",
    "img_emb.proj.0": "condition_embedder.image_embedder.norm1",
    "img_emb.proj.1": "condition_embedder.image_embedder.ff.net.0.proj",
    "img_emb.proj.3": "condition_embedder.image_embedder.ff.net.2",
    "img_emb.proj.4": "condition_embedder.image_embedder.norm2",
}
# Bare parameters (no `.weight`): a full delta on them is the tensor itself.
BLOCK_PARAMETERS = {"modulation": "scale_shift_table"}
TOP_PARAMETERS = {
    "head.modulation": "scale_shift_table",
    "img_emb.emb_pos": "condition_embedder.image_embedder.pos_embed",
}

_BLOCK = re.compile(r"blocks\.(\d+)\.(.+)")
_KOHYA_BLOCK = re.compile(r"blocks_(\d+)_(.+)")
_KOHYA_BLOCK_NAMES = {name.replace(".", "_"): name for name in (*BLOCK_MODULES, *BLOCK_PARAMETERS)}
_KOHYA_TOP_NAMES = {name.replace(".", "_"): name for name in (*TOP_MODULES, *TOP_PARAMETERS)}


def _lookup(original: str, block_table: dict[str, str], top_table: dict[str, str]) -> str | None:
    match = _BLOCK.fullmatch(original)
    if match:
        inner = block_table.get(match[2])
        return None if inner is None else f"blocks.{match[1]}.{inner}"
    return top_table.get(original)


def diffusers_module(original: str) -> str | None:
    """`blocks.3.self_attn.q` -> `blocks.3.attn1.to_q`; None for a name the table does not know."""
    return _lookup(original, BLOCK_MODULES, TOP_MODULES)


def diffusers_parameter(original: str) -> str | None:
    """`blocks.3.modulation` -> `blocks.3.scale_shift_table`; None if not a bare parameter."""
    return _lookup(original, BLOCK_PARAMETERS, TOP_PARAMETERS)


def original_from_kohya(name: str) -> str | None:
    """`blocks_3_self_attn_q` (kohya / musubi-tuner, after `lora_unet_`) -> `blocks.3.self_attn.q`."""
    match = _KOHYA_BLOCK.fullmatch(name)
    if match:
        inner = _KOHYA_BLOCK_NAMES.get(match[2])
        return None if inner is None else f"blocks.{match[1]}.{inner}"
    return _KOHYA_TOP_NAMES.get(name)
