"""The real Wan 2.1 / 2.2 transformer configs build abstractly (never materialised) with
exactly diffusers' parameter count and tensor names/shapes."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest
import torch
from diffusers import WanTransformer3DModel
from flax import nnx

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import transformer_weight_shapes
from wanjax.domain.specs import TransformerSpec

WAN21_T2V_1_3B = dict(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
    out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024,
)  # fmt: skip
WAN21_T2V_14B = {**WAN21_T2V_1_3B, "num_attention_heads": 40, "ffn_dim": 13824, "num_layers": 40}
# 480p and 720p share this transformer; CLIP ViT-H/14 image tokens are 1280 wide.
WAN21_I2V_14B = {**WAN21_T2V_14B, "in_channels": 36, "image_dim": 1280, "added_kv_proj_dim": 5120}
WAN21_FLF2V_14B = {**WAN21_I2V_14B, "pos_embed_seq_len": 2 * 257}
WAN22_T2V_A14B = WAN21_T2V_14B  # each of the two experts
WAN22_I2V_A14B = {**WAN21_T2V_14B, "in_channels": 36}  # image latent channels only, no CLIP tokens
WAN22_TI2V_5B = {
    **WAN21_T2V_1_3B, "num_attention_heads": 24, "in_channels": 48, "out_channels": 48,
    "ffn_dim": 14336, "num_layers": 30,
}  # fmt: skip

CONFIGS = {
    "2.1-T2V-1.3B": WAN21_T2V_1_3B,
    "2.1-T2V-14B": WAN21_T2V_14B,
    "2.1-I2V-14B": WAN21_I2V_14B,
    "2.1-FLF2V-14B": WAN21_FLF2V_14B,
    "2.2-T2V-A14B": WAN22_T2V_A14B,
    "2.2-I2V-A14B": WAN22_I2V_A14B,
    "2.2-TI2V-5B": WAN22_TI2V_5B,
}


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
def test_matches_diffusers_parameters(config: dict, scan_layers: bool) -> None:
    spec = TransformerSpec.from_diffusers_config(config)
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    model = nnx.eval_shape(lambda: WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    with torch.device("meta"):
        reference = WanTransformer3DModel(**config)

    ours = sum(math.prod(p.get_value().shape) for _, p in nnx.iter_graph(model) if isinstance(p, nnx.Param))
    assert ours == sum(p.numel() for p in reference.parameters())
    expected = {name: tuple(t.shape) for name, t in reference.state_dict().items()}
    assert transformer_weight_shapes(model) == expected
