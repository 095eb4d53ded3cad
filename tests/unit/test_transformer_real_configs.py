"""The real Wan 2.1 / 2.2 (and SkyReels-V2 DF) transformer configs build abstractly (never materialised) with
exactly diffusers' parameter count and tensor names/shapes."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest
import torch
from flax import nnx

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import storage_layout, transformer_weight_shapes
from wanjax.adapters.torch.diffusers_bench import diffusers_config, transformer_class
from wanjax.domain.architectures import (
    SKYREELS_V2_DF_1_3B,
    WAN21_FLF2V_14B,
    WAN21_I2V_14B,
    WAN21_T2V_1_3B,
    WAN21_T2V_14B,
    WAN21_VACE_1_3B,
    WAN21_VACE_14B,
    WAN22_ANIMATE_14B,
    WAN22_I2V_A14B,
    WAN22_T2V_A14B,
    WAN22_TI2V_5B,
)
from wanjax.domain.memory import transformer_parameters
from wanjax.domain.specs import TransformerSpec

CONFIGS = {
    "2.1-T2V-1.3B": WAN21_T2V_1_3B,
    "2.1-T2V-14B": WAN21_T2V_14B,
    "2.1-I2V-14B": WAN21_I2V_14B,
    "2.1-FLF2V-14B": WAN21_FLF2V_14B,
    "2.2-T2V-A14B": WAN22_T2V_A14B,
    "2.2-I2V-A14B": WAN22_I2V_A14B,
    "2.2-TI2V-5B": WAN22_TI2V_5B,
    "2.1-VACE-1.3B": WAN21_VACE_1_3B,
    "2.1-VACE-14B": WAN21_VACE_14B,
    "2.2-Animate-14B": WAN22_ANIMATE_14B,
    "SkyReels-V2-DF-1.3B": SKYREELS_V2_DF_1_3B,  # the 1.3B's fps embedding (the 14B ones are Wan 2.1 T2V's)
}
# diffusers' parameter counts of these configs, in billions (the sizes the model names round)
BILLIONS = {
    "2.1-T2V-1.3B": 1.419, "2.1-T2V-14B": 14.288, "2.1-I2V-14B": 16.395, "2.1-FLF2V-14B": 16.396,
    "2.2-T2V-A14B": 14.288, "2.2-I2V-A14B": 14.289, "2.2-TI2V-5B": 5.000,
    "2.1-VACE-1.3B": 2.154, "2.1-VACE-14B": 17.338, "2.2-Animate-14B": 17.275, "SkyReels-V2-DF-1.3B": 1.436,
}  # fmt: skip


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_diffusers_parameters(name: str, scan_layers: bool) -> None:
    spec = CONFIGS[name]
    config = diffusers_config(spec)
    assert TransformerSpec.from_diffusers_config(config) == spec
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    model = nnx.eval_shape(lambda: WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    with torch.device("meta"):
        reference = transformer_class(spec)(**config)

    ours = sum(math.prod(p.get_value().shape) for _, p in nnx.iter_graph(model) if isinstance(p, nnx.Param))
    assert ours == sum(p.numel() for p in reference.parameters())
    assert round(ours / 1e9, 3) == BILLIONS[name]
    assert transformer_parameters(spec)[0] == ours  # the memory plan's count, from the spec alone
    fp8 = [s.shape for s in storage_layout(model, jnp.float8_e4m3fn).values() if s.dtype == jnp.float8_e4m3fn]
    assert transformer_parameters(spec)[1] == sum(map(math.prod, fp8))  # and of what fp8 storage stores
    expected = {name: tuple(t.shape) for name, t in reference.state_dict().items()}
    assert transformer_weight_shapes(model) == expected
