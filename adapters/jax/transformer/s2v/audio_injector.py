"""S2V's audio injectors (the official `AudioInjector_WAN`, as `WanModel_S2V.after_transformer_block`
runs them), and after which blocks they act.

After each block `S2VSpec.injector_of_block` names, one injector adds a cross-attention of the
video tokens over the audio tokens, frame by frame: latent frame f's tokens attend only to frame
f's N + 1 audio tokens. The video tokens are first normalised: a LayerNorm without affine (eps
1e-6), or with `enable_adain` diffusers' AdaLayerNorm (chunk_dim=1) by the frame's global audio
token: LayerNorm (eps 1e-5, no affine) * (1 + scale) + shift, [shift, scale] = linear(silu(g)).
The attention is Wan's cross-attention (q/k RMS-normed across heads, eps 1e-6). No gate: the
output is added to the video tokens' residual stream; the reference and motion tokens after them
are left as they are.

The injectors are one stack (stacked [K, ...] with `scan_layers`, else a list), like Animate's
face adapters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import Attention, fp32_layer_norm
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.audio_encoder import AudioTokens
from wanjax.adapters.jax.transformer.stacking import block_stack
from wanjax.domain.attention_call import CROSS, AttentionCall
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import TransformerSpec

ATTENTION_EPS = 1e-6
"""AudioCrossAttention's q/k RMS norms keep WanSelfAttention's default eps."""
PRE_NORM_EPS = 1e-6
ADAIN_NORM_EPS = 1e-5
"""diffusers' AdaLayerNorm builds its LayerNorm with its own default eps (1e-5)."""
AUDIO_CALL = AttentionCall(kind=CROSS)
"""The injectors' call: each latent frame's video tokens over its audio tokens (frames in the batch, no grid)."""


class AudioInjector(nnx.Module):
    """One audio injector: video tokens and one clip's `AudioTokens` -> the video tokens plus its output."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim = spec.inner_dim
        self.attention = Attention(
            dim, spec.num_attention_heads, ATTENTION_EPS, runtime, kernel=runtime.attention, rngs=rngs
        )
        self.adain = (
            nnx.Linear(dim, 2 * dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs)
            if s2v.enable_adain
            else None
        )
        eps = PRE_NORM_EPS if self.adain is None else ADAIN_NORM_EPS
        self.norm = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.dtype = runtime.dtype

    def __call__(self, x: jax.Array, audio: AudioTokens, video_tokens: int) -> jax.Array:
        """x [B, S, D] whose first `video_tokens` are the clip's latent frames (F' of them, the
        audio tokens' frames [B, F', N + 1, D]) -> x [B, S, D] with those tokens updated."""
        b, frames, streams, dim = audio.tokens.shape
        if video_tokens % frames:
            raise ValueError(f"{video_tokens} video tokens do not split into the audio tokens' {frames} frames")
        # Frames join the batch: [B * F', S_f, D] queries over [B * F', N + 1, D] keys and values.
        video = x[:, :video_tokens].reshape(b * frames, video_tokens // frames, dim)
        h = self.norm(video)
        if self.adain is not None:
            if audio.global_token is None:
                raise ValueError("this model's audio injectors (enable_adain) need the audio encoder's global token")
            glob = audio.global_token.reshape(b * frames, dim).astype(self.dtype)
            shift, scale = jnp.split(self.adain(jax.nn.silu(glob)).astype(jnp.float32)[:, None], 2, axis=-1)
            h = h * (1 + scale) + shift
        kv = self.attention.key_values(audio.tokens.reshape(b * frames, streams, dim).astype(self.dtype), None)
        out = self.attention.cross(h.astype(self.dtype), kv, AUDIO_CALL).reshape(b, video_tokens, dim)
        updated = (x[:, :video_tokens].astype(jnp.float32) + out.astype(jnp.float32)).astype(x.dtype)
        return jnp.concatenate([updated, x[:, video_tokens:]], axis=1)


def injector_slots(spec: TransformerSpec, s2v: S2VSpec) -> np.ndarray:
    """[num_layers] int32: after block i run audio injector slots[i]; -1 where none."""
    return np.asarray(s2v.injector_of_block(spec.num_layers), np.int32)


def injector_stack(
    spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs
) -> AudioInjector | nnx.List:
    """The model's audio injectors, stacked like its blocks."""
    return block_stack(
        lambda rngs: AudioInjector(spec, s2v, runtime, rngs=rngs),
        s2v.injector_count(spec.num_layers),
        scan_layers=runtime.scan_layers,
        rngs=rngs,
    )
