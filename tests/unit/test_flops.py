"""The domain FLOP model against an independent count: the dot_general equations of the
JAX transformer's traced forward.

The walker sums 2 * prod(batch dims) * M * N * K over every dot_general in the jaxpr,
descending into sub-jaxprs (jit, custom_jvp, ...) and multiplying a scan body by its
length. Elementwise ops (norms, softmax, GELU, RoPE, modulation) are excluded on both
sides; the counts agree exactly today, and 2% is the bound the model promises.
"""

import math

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jax.extend import core as jex_core

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.flops import transformer_flops_per_step
from wanjax.domain.specs import TransformerSpec

TINY = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=12,
    text_dim=32, freq_dim=20, ffn_dim=40, num_layers=3,
)  # fmt: skip
TINY_I2V = {**TINY, "image_dim": 28, "added_kv_proj_dim": 24}
TINY_VACE = {**TINY, "vace_layers": (0, 2), "vace_in_channels": 8}
FRAMES, HEIGHT, WIDTH, TEXT, IMAGE, BATCH = 3, 8, 6, 5, 7, 2


def dot_general_flops(jaxpr: jex_core.Jaxpr) -> int:
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
            lhs, rhs = (v.aval.shape for v in eqn.invars)
            k = math.prod(lhs[i] for i in lhs_contract)
            batch = math.prod(lhs[i] for i in lhs_batch)
            m = math.prod(lhs) // (k * batch)
            n = math.prod(rhs) // (k * batch)
            total += 2 * batch * m * n * k
        repeat = eqn.params["length"] if eqn.primitive.name == "scan" else 1
        for sub in jex_core.jaxprs_in_params(eqn.params):
            total += repeat * dot_general_flops(sub)
    return total


def vace_control(spec: TransformerSpec) -> dict[str, jax.Array]:
    """The control latents a VACE model takes (none for the others)."""
    if not spec.is_vace:
        return {}
    return {"extensions": {"vace": {"control": jnp.zeros((BATCH, FRAMES, HEIGHT, WIDTH, spec.vace_in_channels))}}}


def traced_flops(spec: TransformerSpec, *, scan_layers: bool, image: bool, per_token: bool) -> int:
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers)
    graphdef, state = nnx.split(WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    tokens = FRAMES * (HEIGHT // 2) * (WIDTH // 2)
    latents = jnp.zeros((BATCH, FRAMES, HEIGHT, WIDTH, spec.in_channels))
    timestep = jnp.ones((BATCH, tokens) if per_token else (BATCH,))
    context = jnp.zeros((BATCH, TEXT, spec.text_dim))
    kwargs = {"image_context": jnp.zeros((BATCH, IMAGE, spec.image_dim))} if image else {}
    kwargs.update(vace_control(spec))

    def forward(state, *args):
        return nnx.merge(graphdef, state)(*args, **kwargs)

    closed = jax.make_jaxpr(forward)(state, latents, timestep, context)
    return dot_general_flops(closed.jaxpr)


@pytest.mark.parametrize(
    "config, scan_layers, per_token",
    [(TINY, True, False), (TINY, False, False), (TINY, True, True), (TINY_I2V, True, False),
     (TINY_VACE, True, False), (TINY_VACE, False, False)],
    ids=["t2v-scan", "t2v-loop", "ti2v-per-token", "i2v", "vace-scan", "vace-loop"],
)
def test_model_counts_every_matmul_of_the_forward(config, scan_layers, per_token):
    spec = TransformerSpec(**config)
    image = spec.image_dim is not None
    expected = traced_flops(spec, scan_layers=scan_layers, image=image, per_token=per_token)
    counted = transformer_flops_per_step(
        spec, FRAMES, HEIGHT, WIDTH, TEXT, BATCH, IMAGE if image else 0, per_token_timesteps=per_token
    )
    assert counted == pytest.approx(expected, rel=0.02)


def test_attention_dominates_at_720p_for_wan21_14b():
    """Sanity at real size (no tracing): 81 frames of 1280x720 are 21 x 90 x 160 latents,
    75600 tokens; self-attention QK^T + PV alone is 4 * S^2 * D per layer."""
    spec = TransformerSpec(num_attention_heads=40, attention_head_dim=128, ffn_dim=13824, num_layers=40)
    total = transformer_flops_per_step(spec, 21, 90, 160, 512, 1)
    self_attention = 40 * 4 * 75600**2 * 5120
    assert 0.6 < self_attention / total < 0.8  # 72%: 6.52 PFLOP per forward in all


@pytest.mark.parametrize("config", [TINY, TINY_I2V, TINY_VACE], ids=["t2v", "i2v", "vace"])
def test_kv_cached_count_is_the_forward_given_its_cache(config):
    """With the KV cache, a step runs everything but the text/image embedders and K/V projections."""
    spec = TransformerSpec(**config)
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    graphdef, state = nnx.split(WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    image = jnp.zeros((BATCH, IMAGE, spec.image_dim)) if spec.image_dim else None
    cache = jax.eval_shape(
        lambda s: nnx.merge(graphdef, s).cross_attention_kv(jnp.zeros((BATCH, TEXT, spec.text_dim)), image), state
    )
    latents = jnp.zeros((BATCH, FRAMES, HEIGHT, WIDTH, spec.in_channels))

    def step(state, latents, cache):
        return nnx.merge(graphdef, state)(latents, jnp.ones((BATCH,)), cache=cache, **vace_control(spec))

    expected = dot_general_flops(jax.make_jaxpr(step)(state, latents, cache).jaxpr)
    counted = transformer_flops_per_step(
        spec, FRAMES, HEIGHT, WIDTH, TEXT, BATCH, IMAGE if image is not None else 0, kv_cached=True
    )
    assert counted == expected
