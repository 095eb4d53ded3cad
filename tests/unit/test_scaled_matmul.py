"""fp8 (e4m3) and int8 matrix products with dynamic per-token and per-channel scales, on the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.platform.scaled_matmul import fp8_dot_general, int8_dot_general

LINEAR = (((2,), (0,)), ((), ()))  # [B, S, K] x [K, N], as nnx.Linear calls it


def _relative_l2(out: jax.Array, reference: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(out, np.float64) - reference) / np.linalg.norm(reference))


def test_error_is_e4m3_rounding_of_both_operands_whatever_their_scales() -> None:
    """Rows and channels of very different magnitudes (1e-3 to 1e2): each keeps its own scale, so the
    error stays e4m3's rounding (about 3.6% RMS per operand), not a loss of the small ones."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 48, 256)) * np.logspace(-3, 2, 48)[None, :, None]
    w = rng.standard_normal((256, 80)) * np.logspace(-3, 1, 80)[None, :]
    reference = np.einsum("bsk,kn->bsn", x, w)
    out = jax.jit(lambda a, b: fp8_dot_general(a, b, LINEAR))(jnp.asarray(x, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16))
    assert out.dtype == jnp.bfloat16 and out.shape == (2, 48, 80)
    error = np.asarray(out, np.float64) - reference
    # each token's and each channel's own relative error, so the small ones count as much as the large
    by_token = np.linalg.norm(error, axis=2) / np.linalg.norm(reference, axis=2)
    by_channel = np.linalg.norm(error, axis=(0, 1)) / np.linalg.norm(reference, axis=(0, 1))
    # measured 0.10 and 0.095 at most (a product that cancels to a small value has a larger relative
    # error); a shared scale would have lost the 1e-3 rows and channels to e4m3's underflow entirely
    assert by_token.max() <= 0.15 and by_channel.max() <= 0.15
    assert 0.01 < _relative_l2(out, reference) <= 0.06  # fp8 ran (bf16's is 3e-3) and kept its bound


def test_zero_rows_stay_zero_and_finite() -> None:
    x = np.zeros((1, 4, 32), np.float32)
    x[0, 1] = 1.0
    out = fp8_dot_general(jnp.asarray(x), jnp.ones((32, 8)), LINEAR, preferred_element_type=jnp.float32)
    assert out.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_array_equal(np.asarray(out)[0, [0, 2, 3]], 0.0)
    np.testing.assert_allclose(np.asarray(out)[0, 1], 32.0, rtol=1e-6)  # ones are exact in e4m3


def test_a_linear_layer_runs_through_it() -> None:
    linear = nnx.Linear(64, 16, dot_general=fp8_dot_general, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (3, 64))
    reference = np.asarray(x, np.float64) @ np.asarray(linear.kernel[...], np.float64)
    assert _relative_l2(linear(x), reference) <= 0.06


def test_batch_dimensions_get_scales_per_batch_slice() -> None:
    """Attention's products ([B, N] batch axes, as adapters/jax/attention/fp8.py calls them), with
    heads of very different magnitudes: each head keeps its own scales, so each head's error is e4m3's."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 3, 24, 64)) * np.array([1e-3, 1.0, 1e2])[None, :, None, None]
    k = rng.standard_normal((2, 3, 40, 64))
    reference = np.einsum("bnth,bnsh->bnts", q, k)
    out = fp8_dot_general(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32), (((3,), (3,)), ((0, 1), (0, 1))))
    assert out.shape == (2, 3, 24, 40)
    for head in range(3):  # measured 0.035-0.036
        assert 0.01 < _relative_l2(out[:, head], reference[:, head]) <= 0.06
    # batch axes that do not lead the operand: v [B, S, N, H] contracted over S with p [B, N, T, S]
    p = rng.uniform(size=(2, 3, 24, 40))
    v = rng.standard_normal((2, 40, 3, 16))
    out = fp8_dot_general(jnp.asarray(p), jnp.asarray(v), (((3,), (1,)), ((0, 1), (0, 2))))
    assert out.shape == (2, 3, 24, 16)
    assert _relative_l2(out, np.einsum("bnts,bsnh->bnth", p, v)) <= 0.06  # measured 0.037


def test_int8_rounds_to_the_nearest_step() -> None:
    """int8 operands (127 steps a side per slice): about 1% off for normal operands, measured 0.98%;
    a truncating cast would bias every product toward zero (measured 2.4%)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 64, 256)), rng.standard_normal((256, 32))
    out = int8_dot_general(jnp.asarray(x), jnp.asarray(w), LINEAR, preferred_element_type=jnp.float32)
    assert 0.002 < _relative_l2(out, x @ w) <= 0.015
