"""The tokamax backend: a clear config error where it cannot run, and the call it makes.

tokamax is not a dependency; a fake module stands in for it to check what the adapter
passes. Equality with XLA on the real package runs only where tokamax is importable and
JAX runs on a GPU or TPU.
"""

import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.attention.tokamax import TokamaxAttention
from wanjax.domain.attention_call import CROSS, AttentionCall
from wanjax.domain.errors import ConfigError

CALL = AttentionCall(kind=CROSS)


def qkv(t: int, s: int, seed: int = 0) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((2, n, 2, 16)), jnp.float32) for n in (t, s, s))


@pytest.fixture
def fake_tokamax(monkeypatch):
    """A `tokamax` module whose dot_product_attention records its calls and runs XLA's."""
    calls = []

    def dot_product_attention(q, k, v, **kwargs):
        calls.append((k.shape, kwargs))
        return jax.nn.dot_product_attention(q, k, v, implementation="xla", **kwargs)

    module = types.ModuleType("tokamax")
    module.dot_product_attention = dot_product_attention
    monkeypatch.setitem(sys.modules, "tokamax", module)
    return calls


def test_missing_package_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokamax", None)  # makes `import tokamax` fail
    with pytest.raises(ConfigError, match=r"pip install tokamax.*attention=xla"):
        TokamaxAttention()


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="checks the CPU refusal")
def test_platform_without_kernels_is_refused(fake_tokamax):
    with pytest.raises(ConfigError, match=r"'cpu'.*attention=xla"):
        TokamaxAttention()


def test_pads_keys_to_the_alignment_and_masks_them_by_length(fake_tokamax, monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    q, k, v = qkv(5, 257)
    out = TokamaxAttention(key_alignment=128)(q, k, v, CALL)
    (k_shape, kwargs), = fake_tokamax
    assert k_shape[1] == 384 and kwargs["key_value_seq_lengths"].tolist() == [257, 257]
    np.testing.assert_allclose(out, XlaAttention()(q, k, v, CALL), atol=1e-6)

