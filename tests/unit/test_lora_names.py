"""The original -> diffusers name table against diffusers' own LoRA key conversion and model."""

from __future__ import annotations

import re

import pytest
import torch
from diffusers import WanTransformer3DModel
from diffusers.loaders.lora_pipeline import WanLoraLoaderMixin

from wanjax.adapters.checkpoints.wan_names import (
    BLOCK_MODULES,
    BLOCK_PARAMETERS,
    TOP_MODULES,
    TOP_PARAMETERS,
    diffusers_module,
    diffusers_parameter,
    original_from_kohya,
)

# the block modules diffusers' converters rename (norms, modulation: the full-delta table only)
LINEAR_BLOCK_MODULES = [m for m in BLOCK_MODULES if "norm" not in m]
LINEAR_TOP_MODULES = ["time_projection.1", "head.head", "text_embedding.0", "text_embedding.2",
                      "time_embedding.0", "time_embedding.2", "img_emb.proj.1", "img_emb.proj.3"]  # fmt: skip


def _pair(prefix: str, module: str, alpha: bool) -> dict[str, torch.Tensor]:
    key = f"{prefix}{module}"
    pair = {f"{key}.lora_down.weight": torch.ones(2, 4), f"{key}.lora_up.weight": torch.ones(4, 2)}
    return pair | ({f"{key}.alpha": torch.tensor(2.0)} if alpha else {})


def _converted_modules(state_dict: dict[str, torch.Tensor]) -> set[str]:
    converted = WanLoraLoaderMixin.lora_state_dict(state_dict)
    return {re.sub(r"\.lora_[AB]\.(weight|bias)$", "", key.removeprefix("transformer.")) for key in converted}


def test_original_names_match_diffusers_conversion():
    blocks = [f"blocks.{i}.{m}" for i in (0, 3) for m in LINEAR_BLOCK_MODULES]
    state = {}
    for module in blocks:
        state |= _pair("diffusion_model.", module, alpha=True)
    for module in LINEAR_TOP_MODULES:  # diffusers reads alphas of block modules only
        state |= _pair("diffusion_model.", module, alpha=False)
    assert _converted_modules(state) == {diffusers_module(m) for m in blocks + LINEAR_TOP_MODULES}


def test_kohya_names_match_diffusers_musubi_conversion():
    state = {}
    for module in LINEAR_BLOCK_MODULES:
        state |= _pair("lora_unet_", f"blocks_0_{module.replace('.', '_')}", alpha=True)
    assert _converted_modules(state) == {diffusers_module(f"blocks.0.{m}") for m in LINEAR_BLOCK_MODULES}
    assert original_from_kohya("blocks_12_cross_attn_v_img") == "blocks.12.cross_attn.v_img"
    assert original_from_kohya("head_head") == "head.head" and original_from_kohya("blocks_1_nope") is None


@pytest.fixture(scope="module")
def i2v_model_names() -> set[str]:
    """Every tensor name of a tiny Wan I2V (FLF2V: with pos_embed) diffusers transformer."""
    model = WanTransformer3DModel(
        num_attention_heads=2, attention_head_dim=4, in_channels=4, out_channels=4, text_dim=8, freq_dim=8,
        ffn_dim=16, num_layers=1, image_dim=8, added_kv_proj_dim=8, pos_embed_seq_len=4,
    )  # fmt: skip
    return set(model.state_dict())


def test_every_target_exists_in_the_diffusers_model(i2v_model_names):
    for module in [f"blocks.0.{m}" for m in BLOCK_MODULES] + list(TOP_MODULES):
        assert f"{diffusers_module(module)}.weight" in i2v_model_names, module
    for parameter in [f"blocks.0.{p}" for p in BLOCK_PARAMETERS] + list(TOP_PARAMETERS):
        assert diffusers_parameter(parameter) in i2v_model_names, parameter
