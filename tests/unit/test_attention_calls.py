"""What the transformer tells its attention kernels: each call's kind, the queries' token grid,
and the block's index where blocks run as a list (None under the scan, whose one traced body
serves every layer)."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.attention_call import CROSS, SELF, AttentionCall
from wanjax.domain.specs import TransformerSpec

SPEC = TransformerSpec(
    num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, text_dim=16,
    freq_dim=8, ffn_dim=16, num_layers=2, image_dim=12, added_kv_proj_dim=16, rope_max_seq_len=16,
)  # fmt: skip
LATENTS = (1, 3, 4, 6, 4)  # [B, F, H, W, C] -> grid (3, 2, 3) with patch (1, 2, 2)


@dataclasses.dataclass(frozen=True, eq=False)
class RecordingAttention:
    """XLA attention that records every call's description as it is traced."""

    calls: list = dataclasses.field(default_factory=list)
    key_alignment: int = 1

    def check(self, call: AttentionCall) -> None:
        XlaAttention().check(call)

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.calls.append(call)
        return XlaAttention()(q, k, v, call)


@pytest.mark.parametrize("scan_layers", [True, False])
def test_blocks_describe_each_call(scan_layers):
    kernel = RecordingAttention()
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers, attention=kernel)
    model = WanTransformer(SPEC, runtime, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    inputs = (
        jax.ShapeDtypeStruct(LATENTS, jnp.float32),
        jax.ShapeDtypeStruct((1,), jnp.float32),
        jax.ShapeDtypeStruct((1, 5, 16), jnp.float32),  # text
        jax.ShapeDtypeStruct((1, 7, 12), jnp.float32),  # image tokens
    )
    forward = lambda state, x, t, text, image: nnx.merge(graphdef, state)(x, t, text, image_context=image)  # noqa: E731
    jax.eval_shape(forward, state, *inputs)  # traced only: the calls are known before anything compiles
    layers = [None] if scan_layers else [0, 1]
    expected = []
    for layer in layers:  # per block: self-attention, then cross-attention over text and over image tokens
        self_call = AttentionCall(kind=SELF, grid=(3, 2, 3), layer=layer)
        expected += [self_call, AttentionCall(kind=CROSS, grid=(3, 2, 3), layer=layer), self_call.as_cross()]
    assert kernel.calls == expected
