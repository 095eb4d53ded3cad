"""Wan Animate's face encoder (diffusers' WanAnimateFaceEncoder): per-frame motion vectors
[B, T, motion_encoder_dim] -> face tokens [B, T', N + 1, D] for the face adapters.

Three causal temporal convolutions (kernel 3, the left edge padded by repeating the first
frame): the first widens to N = face_encoder_num_heads streams of `face_encoder_hidden_dim`,
the next two (shared by the streams) each halve the frame rate, so T' = ceil(T / 4) as the
VAE compresses the video's frames; each is followed by a LayerNorm without affine and a SiLU.
A linear projection takes every stream to the model width, and a learnt padding token is
appended to each frame's N streams.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import fp32_layer_norm
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import TransformerSpec

KERNEL = 3
NORM_EPS = 1e-6
"""diffusers builds the face encoder with its own default eps, whatever the transformer's."""


class CausalConv(nnx.Module):
    """A temporal Conv1d over channels-last frames [B, T, C], left-padded by repeating frame 0."""

    def __init__(self, c_in: int, c_out: int, stride: int, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal(in_axis=(0, 1), out_axis=2)
        self.kernel = nnx.Param(init(rngs.params(), (KERNEL, c_in, c_out), runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((c_out,), runtime.param_dtype))
        self.stride = stride
        self.dtype = runtime.dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        """[B, T, C_in] -> [B, (T - 1) // stride + 1, C_out]."""
        x = jnp.pad(x, ((0, 0), (KERNEL - 1, 0), (0, 0)), mode="edge")
        out = jax.lax.conv_general_dilated(
            x, self.kernel[...].astype(self.dtype), (self.stride,), [(0, 0)], dimension_numbers=("NWC", "WIO", "NWC")
        )
        return out + self.bias[...].astype(self.dtype)


class FaceEncoder(nnx.Module):
    """Motion vectors -> face tokens (see the module docstring)."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        animate = spec.animate
        hidden, heads = animate.face_encoder_hidden_dim, animate.face_encoder_num_heads
        self.conv1_local = CausalConv(animate.motion_encoder_dim, hidden * heads, 1, runtime, rngs=rngs)
        self.conv2 = CausalConv(hidden, hidden, 2, runtime, rngs=rngs)
        self.conv3 = CausalConv(hidden, hidden, 2, runtime, rngs=rngs)
        self.norm = fp32_layer_norm(hidden, NORM_EPS, affine=False, rngs=rngs)
        self.out_proj = nnx.Linear(
            hidden, spec.inner_dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.padding_tokens = nnx.Param(jnp.zeros((1, 1, 1, spec.inner_dim), runtime.param_dtype))
        self.heads = heads
        self.dtype = runtime.dtype

    def __call__(self, motion: jax.Array) -> jax.Array:
        """motion [B, T, motion_encoder_dim] -> [B, T', N + 1, D] (activation dtype)."""
        b = motion.shape[0]
        x = self.conv1_local(motion.astype(self.dtype))  # [B, T, N * C]
        x = x.reshape(b, x.shape[1], self.heads, -1).transpose(0, 2, 1, 3)  # [B, N, T, C]
        x = self._norm_silu(x.reshape(b * self.heads, x.shape[2], -1))  # [B * N, T, C]
        x = self._norm_silu(self.conv3(self._norm_silu(self.conv2(x))))  # [B * N, T', C]
        x = self.out_proj(x)  # [B * N, T', D]
        x = x.reshape(b, self.heads, *x.shape[1:]).transpose(0, 2, 1, 3)  # [B, T', N, D]
        padding = jnp.broadcast_to(self.padding_tokens[...].astype(self.dtype), (b, x.shape[1], 1, x.shape[-1]))
        return jnp.concatenate([x, padding], axis=2)

    def _norm_silu(self, x: jax.Array) -> jax.Array:
        return jax.nn.silu(self.norm(x)).astype(self.dtype)
