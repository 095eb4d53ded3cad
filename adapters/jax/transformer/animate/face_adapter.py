"""Wan Animate's face adapter blocks (diffusers' WanAnimateFaceBlockCrossAttention), and where
they act in the block stack.

After every `inject_face_latents_blocks`-th base block (0, k, 2k, ...) one adapter block adds
a cross-attention of the video tokens over the face tokens, frame by frame: the tokens of
latent frame f attend only to frame f's N + 1 face tokens. Both sides are LayerNormed (no
affine) first; q and k get an RMS norm per head (over the head dim, unlike the base blocks'
norm across heads). No gate, no modulation: the output is added to the residual stream.

The adapters are one stack, like the blocks (stacked [A, ...] with `scan_layers`, else a
list). Inside the scanned blocks, `with_face` picks adapter `slot` of the stack by index
and runs it under `lax.cond`, so only the blocks that have one pay for it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import fp32_layer_norm
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.stacking import with_slot
from wanjax.domain.attention_call import CROSS, AttentionCall
from wanjax.domain.specs import TransformerSpec

FACE_CALL = AttentionCall(kind=CROSS)
"""The face adapters' attention: one latent frame's tokens (frames joined to the batch, so no
grid of the video) over that frame's face tokens."""


class FaceAdapter(nnx.Module):
    """One face adapter block: x [B, S, D] and face tokens [B, F', N + 1, D] -> its addition [B, S, D]."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim, eps = spec.inner_dim, spec.eps
        linear = functools.partial(
            nnx.Linear, dim, dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype,
            dot_general=runtime.block_matmul, rngs=rngs,
        )  # fmt: skip
        self.pre_norm_q = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.pre_norm_kv = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.to_q, self.to_k, self.to_v, self.to_out = linear(), linear(), linear(), linear()
        rms = functools.partial(
            nnx.RMSNorm,
            spec.attention_head_dim,
            epsilon=eps,
            dtype=jnp.float32,
            param_dtype=runtime.param_dtype,
            rngs=rngs,
        )
        self.norm_q, self.norm_k = rms(), rms()
        self.heads = spec.num_attention_heads
        self.attention = runtime.attention
        self.dtype = runtime.dtype

    def __call__(self, x: jax.Array, face: jax.Array) -> jax.Array:
        b, s, _ = x.shape
        frames, streams = face.shape[1:3]
        if s % frames:
            raise ValueError(f"{s} video tokens do not split into the face tokens' {frames} frames")
        q = self.to_q(self.pre_norm_q(x).astype(self.dtype))  # [B, S, D]
        kv = self.pre_norm_kv(face).astype(self.dtype).reshape(b, frames * streams, -1)  # [B, F' * (N + 1), D]
        k, v = self.to_k(kv), self.to_v(kv)
        q = self.norm_q(q.reshape(b, s, self.heads, -1)).astype(self.dtype)  # [B, S, H, Dh]
        k = self.norm_k(k.reshape(b, frames, streams, self.heads, -1)).astype(self.dtype)  # [B, F', N + 1, H, Dh]
        v = v.reshape(b, frames, streams, self.heads, -1)
        # Frame f's tokens attend to frame f's face tokens only: frames join the batch.
        out = self.attention(
            q.reshape(b * frames, s // frames, self.heads, -1),
            k.reshape(b * frames, streams, self.heads, -1),
            v.reshape(b * frames, streams, self.heads, -1),
            FACE_CALL,
        )  # [B * F', S / F', H, Dh]
        return self.to_out(out.reshape(b, s, -1))


def face_slots(spec: TransformerSpec) -> np.ndarray:
    """[num_layers] int32: after base block i run face adapter slots[i]; -1 where none."""
    slots = np.full(spec.num_layers, -1, np.int32)
    slots[:: spec.animate.inject_face_latents_blocks] = np.arange(spec.face_adapter_count)
    return slots


def with_face(x: jax.Array, adapters: FaceAdapter | nnx.List, face: jax.Array, slot: jax.Array | int) -> jax.Array:
    """x [B, S, D] plus face adapter `slot`'s output, or x itself where slot < 0.
    `adapters` is the stack (stacked [A, ...] or a list); `slot` a traced or Python int."""
    return with_slot(x, adapters, slot, lambda adapter, x: x + adapter(x, face))
