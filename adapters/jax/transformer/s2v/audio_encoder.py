"""S2V's audio encoder after wav2vec2 (the official `CausalAudioEncoder` and its `MotionEncoder_tc`):
per video frame the wav2vec2 hidden states of every layer [B, T, 25, C_a] -> per latent frame
`num_audio_token` audio tokens plus a learnt padding token [B, T', N + 1, D], and with
`enable_adain` one global token [B, T', 1, D] that the audio injectors' AdaLN reads.

The layers are mixed by softmax-free weights: silu(w) / sum(silu(w)). Then three causal temporal
convolutions (kernel 3, the left edge padded by repeating the first frame), the first widening to
N streams of D / 4 channels (the global path: one stream, its own first conv), the next two shared
by all streams and halving the frame rate each (D / 4 -> D / 2 -> D, so T' = ceil(T / 4) as the
VAE compresses frames), each followed by a LayerNorm without affine and a SiLU; the global stream
ends in a linear layer. The official code runs all of it under fp32 autocast: so does this.
"""

from __future__ import annotations

from typing import NamedTuple

import attrs
import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.animate.face_encoder import CausalConv
from wanjax.adapters.jax.transformer.blocks import fp32_layer_norm
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.s2v_spec import AUDIO_LAYERS, S2VSpec
from wanjax.domain.specs import TransformerSpec

NORM_EPS = 1e-6
"""MotionEncoder_tc's LayerNorms' eps, whatever the transformer's."""


class AudioTokens(NamedTuple):
    """The audio encoder's output per latent frame: tokens [B, T', N + 1, D] (the audio injectors'
    keys and values) and, with `enable_adain`, the global token [B, T', 1, D] (their AdaLN's input)."""

    tokens: jax.Array
    global_token: jax.Array | None


class AudioTokenEncoder(nnx.Module):
    """`MotionEncoder_tc`: mixed audio features [B, T, C_a] -> `AudioTokens` (module docstring)."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        d, streams = spec.inner_dim, s2v.num_audio_token
        fp32 = attrs.evolve(runtime, dtype=jnp.float32)  # the official code's fp32 autocast
        self.conv1_local = CausalConv(s2v.audio_dim, d // 4 * streams, 1, fp32, rngs=rngs)
        self.conv1_global = CausalConv(s2v.audio_dim, d // 4, 1, fp32, rngs=rngs) if s2v.enable_adain else None
        self.conv2 = CausalConv(d // 4, d // 2, 2, fp32, rngs=rngs)
        self.conv3 = CausalConv(d // 2, d, 2, fp32, rngs=rngs)
        self.final_linear = (
            nnx.Linear(d, d, dtype=jnp.float32, param_dtype=runtime.param_dtype, rngs=rngs)
            if s2v.enable_adain
            else None
        )
        self.norm1 = fp32_layer_norm(d // 4, NORM_EPS, affine=False, rngs=rngs)
        self.norm2 = fp32_layer_norm(d // 2, NORM_EPS, affine=False, rngs=rngs)
        self.norm3 = fp32_layer_norm(d, NORM_EPS, affine=False, rngs=rngs)
        self.padding_tokens = nnx.Param(jnp.zeros((1, 1, 1, d), runtime.param_dtype))
        self.streams = streams

    def __call__(self, audio: jax.Array) -> AudioTokens:
        """audio [B, T, C_a] (fp32) -> `AudioTokens` in fp32."""
        b = audio.shape[0]
        x = self.conv1_local(audio)  # [B, T, N * D/4]
        x = x.reshape(b, x.shape[1], self.streams, -1).transpose(0, 2, 1, 3)  # [B, N, T, D/4]
        x = self._downsample(_silu_norm(self.norm1, x.reshape(b * self.streams, x.shape[2], -1)))  # [B * N, T', D]
        x = x.reshape(b, self.streams, *x.shape[1:]).transpose(0, 2, 1, 3)  # [B, T', N, D]
        padding = jnp.broadcast_to(self.padding_tokens[...].astype(jnp.float32), (b, x.shape[1], 1, x.shape[-1]))
        tokens = jnp.concatenate([x, padding], axis=2)  # [B, T', N + 1, D]
        if self.conv1_global is None:
            return AudioTokens(tokens, None)
        g = self._downsample(_silu_norm(self.norm1, self.conv1_global(audio)))  # [B, T', D]
        return AudioTokens(tokens, self.final_linear(g)[:, :, None])

    def _downsample(self, x: jax.Array) -> jax.Array:
        """[B', T, D/4] -> [B', T', D]: the two shared stride-2 convs, each normed and activated."""
        return _silu_norm(self.norm3, self.conv3(_silu_norm(self.norm2, self.conv2(x))))


def _silu_norm(norm: nnx.LayerNorm, x: jax.Array) -> jax.Array:
    return jax.nn.silu(norm(x))


class CausalAudioEncoder(nnx.Module):
    """`CausalAudioEncoder`: wav2vec2 features [B, T, 25, C_a] -> `AudioTokens` (module docstring)."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        # [1, layers, 1, 1] as the checkpoint stores it; 0.01 each before training.
        self.weights = nnx.Param(jnp.full((1, AUDIO_LAYERS, 1, 1), 0.01, runtime.param_dtype))
        self.encoder = AudioTokenEncoder(spec, s2v, runtime, rngs=rngs)

    def __call__(self, features: jax.Array) -> AudioTokens:
        """features [B, T, 25, C_a]: each video frame's hidden states of every wav2vec2 layer."""
        if features.ndim != 4 or features.shape[2] != AUDIO_LAYERS:
            raise ValueError(
                f"the S2V audio encoder reads [B, T, {AUDIO_LAYERS}, C] wav2vec2 hidden states (every layer's, "
                f"per video frame), got {tuple(features.shape)}"
            )
        weights = jax.nn.silu(self.weights[...].astype(jnp.float32).reshape(AUDIO_LAYERS, 1))  # [L, 1]
        mixed = jnp.einsum("btlc,lk->btc", features.astype(jnp.float32), weights / weights.sum())  # [B, T, C_a]
        return self.encoder(mixed)

    def clip_tokens(self, features: jax.Array, motion_frames: int, latent_motion_frames: int) -> AudioTokens:
        """One clip's audio tokens, as `WanModel_S2V.forward` makes them: the clip's features
        [B, T, 25, C_a] (T = infer_frames) behind `motion_frames` copies of its first frame (the
        motion frames' stand-in), encoded, then the first `latent_motion_frames` latent frames
        dropped: [B, T / 4, N + 1, D] for a T that is a multiple of 4, one per latent frame."""
        lead = jnp.repeat(features[:, :1], motion_frames, axis=1)
        out = self(jnp.concatenate([lead, features], axis=1))
        glob = None if out.global_token is None else out.global_token[:, latent_motion_frames:]
        return AudioTokens(out.tokens[:, latent_motion_frames:], glob)
