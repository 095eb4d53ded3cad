"""cuDNN's fused flash attention (`jax.nn.dot_product_attention(implementation="cudnn")`): the
`auto` backend on NVIDIA GPUs, with a fallback kernel for the calls cuDNN does not take.

cuDNN's kernel never materialises the [T, S] logits and runs in fp16/bf16 only, with head
widths that are multiples of 8 up to 128 (every Wan model: 128). Which calls qualify is
known from shapes and dtypes at trace time, so the choice costs nothing at run time: an
fp32 run (`--dtype float32` on a GPU) or a tiny test model goes to `fallback`, by default
our Pallas flash kernel (Triton on GPUs).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.attention.xla import AttentionFn
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.domain.attention_call import CROSS, HONOURS_BLOCK_CAUSAL, SELF, AttentionCall, refuse_unless_honoured
from wanjax.domain.errors import ConfigError

CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)
CUDNN_MAX_HEAD_DIM = 128


def cudnn_takes(q: jax.Array, k: jax.Array, v: jax.Array) -> bool:
    """Whether cuDNN's flash attention runs q [B, T, N, H], k/v [B, S, N, H] as they are."""
    head_dim = q.shape[-1]
    same_dtype = q.dtype == k.dtype == v.dtype
    return same_dtype and q.dtype in CUDNN_DTYPES and head_dim % 8 == 0 and head_dim <= CUDNN_MAX_HEAD_DIM


@dataclasses.dataclass(frozen=True)
class CudnnAttention:
    """cuDNN flash attention where it applies (`cudnn_takes`), else `fallback` (`AttentionFn`).

    Raises ConfigError, naming the fix, where JAX does not run on a GPU. Refuses a call with a
    structure: cuDNN takes a mask only as a dense [T, S] bias (75k^2 entries at 720p), and our
    Pallas fallback has no structures either.
    """

    fallback: AttentionFn = dataclasses.field(default_factory=PallasAttention)

    @property
    def key_alignment(self) -> int:
        """Keys are never padded to a tile here."""
        return 1

    def __post_init__(self) -> None:
        platform = jax.default_backend()
        if platform != "gpu":
            raise ConfigError(
                f"attention='cudnn' runs on NVIDIA GPUs, and JAX runs on {platform!r}: "
                "choose attention=auto (blockwise on CPU, Pallas on TPU) or blockwise"
            )

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("attention=cudnn", frozenset((SELF, CROSS)), call, f"choose {HONOURS_BLOCK_CAUSAL}")

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        if not cudnn_takes(q, k, v):
            return self.fallback(q, k, v, call)
        attend = functools.partial(jax.nn.dot_product_attention, implementation="cudnn")
        return attend(q, k, v)  # [B, T, N, H]
