"""Wan 2.2 S2V's additions to the transformer (the official `WanModel_S2V`), as one branch of the
NNX model, under the official module names (weight_names.py maps the checkpoint onto them).

Not yet wired into the denoiser (docs/s2v.md says where the extension hooks): the branch holds the
weights and the per-clip embeddings; the block loop will call the audio injectors after the
blocks `injector_slots` names and modulate the reference and motion tokens by timestep 0.

The token sequence of one clip is [video | reference | motion]: the noisy latents' tokens plus
the pose tokens (`cond_encoder`, added), the reference image's tokens, the frame packer's motion
tokens; each token gets the `trainable_cond_mask` vector of its kind (`TOKEN_KINDS`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.embeddings import PatchEmbed
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.audio_encoder import CausalAudioEncoder
from wanjax.adapters.jax.transformer.s2v.audio_injector import injector_stack
from wanjax.adapters.jax.transformer.s2v.frame_pack import FramePackMotioner
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import TransformerSpec

TOKEN_KINDS = ("video", "reference", "motion")
"""The rows of `trainable_cond_mask`, in order: the ids `WanModel_S2V.forward` gives each token."""


class S2VBranch(nnx.Module):
    """The S2V modules: audio encoder and injectors, frame packer, pose encoder, token-kind vectors."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.casual_audio_encoder = CausalAudioEncoder(spec, s2v, runtime, rngs=rngs)  # sic: the official name
        self.audio_injector = injector_stack(spec, s2v, runtime, rngs=rngs)
        self.frame_packer = FramePackMotioner(spec, s2v, runtime, rngs=rngs)
        self.cond_encoder = PatchEmbed(spec, runtime, s2v.cond_dim, rngs=rngs)
        self.trainable_cond_mask = nnx.Embed(
            len(TOKEN_KINDS), spec.inner_dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )

    def kind_vectors(self, video: int, reference: int, motion: int) -> jax.Array:
        """[video + reference + motion, D]: each token's `trainable_cond_mask` row, to add to the tokens."""
        kinds = np.repeat(np.arange(len(TOKEN_KINDS)), (video, reference, motion))
        return self.trainable_cond_mask(jnp.asarray(kinds))
