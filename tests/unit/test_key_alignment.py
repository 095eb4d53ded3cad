"""Keys padded to the matrix-unit tile, with the padding masked out, change nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.attention.xla import XlaAttention, key_alignment_for
from wanjax.domain.attention_call import CROSS, AttentionCall

CALL = AttentionCall(kind=CROSS)


@pytest.mark.parametrize("kv_len", [1, 256, 257])  # 257: Wan 2.1 I2V's CLIP image tokens
def test_padded_keys_equal_unpadded(kv_len):
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((2, n, 3, 16)), jnp.float32) for n in (7, kv_len, kv_len))
    padded = jax.jit(XlaAttention(key_alignment=128), static_argnums=3)(q, k, v, CALL)
    np.testing.assert_allclose(padded, XlaAttention()(q, k, v, CALL), atol=1e-6)


def test_alignment_is_the_tpu_tile_and_none_elsewhere():
    assert key_alignment_for("tpu") == 128
    assert key_alignment_for("cpu") == key_alignment_for("gpu") == 1
