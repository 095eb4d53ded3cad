"""Runtime choices of the JAX Wan transformer, kept apart from its architecture spec."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import jax
from jax import lax
from jax.typing import DTypeLike

from wanjax.adapters.jax.attention.xla import AttentionFn, XlaAttention
from wanjax.adapters.jax.sharding.activations import ActivationSharding


@attrs.frozen(kw_only=True)
class TransformerRuntime:
    """How to run a `TransformerSpec`: dtypes, layer stacking and the attention kernel.

    `dtype` is the activation (compute) dtype, `param_dtype` the storage dtype of the
    weights. The few parameters diffusers keeps in fp32 (modulation tables, the time
    embedder, the affine cross-attention norm) stay fp32 whatever `param_dtype` says.
    `scan_layers` stacks the identical blocks along a leading "layers" axis and runs
    them with `nnx.scan` (one compiled block); otherwise they are a Python list.
    """

    dtype: DTypeLike
    param_dtype: DTypeLike
    scan_layers: bool = True
    attention: AttentionFn = attrs.field(factory=XlaAttention)
    # The blocks' self-attention kernel (None: `attention`), e.g. context-parallel attention
    # over the video tokens; cross-attention always uses `attention` (its text K/V are short).
    self_attention: AttentionFn | None = None
    # The mesh layout activations are pinned to at a few points (None: one device, no constraints).
    activation_sharding: ActivationSharding | None = None
    # The blocks' linear layers' matmul (attention projections, FFN, Animate's face adapters), with
    # lax.dot_general's signature: plain, or fp8_dot_general (adapters/jax/platform/scaled_matmul.py).
    block_matmul: Callable[..., jax.Array] = lax.dot_general
    # The blocks' FFN activation written on its matmul's output for XLA to fuse into the matmul's
    # epilogue (cuBLASLt's BIAS_GELU on NVIDIA GPUs; blocks.FeedForward), instead of a pass of its
    # own in fp32 (the default: where nothing fuses it, the fused form would round in bf16).
    activation_in_matmul_epilogue: bool = False
