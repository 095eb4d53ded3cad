"""Wan 2.2 S2V's additions to the transformer (the official `WanModel_S2V`), as one branch of the
NNX model under the official module names (weight_names.py maps the checkpoint onto them), and
its hooks as a transformer extension (../extension.py).

The token sequence of one clip is [video | reference | motion]: the noisy latents' tokens plus
the pose tokens (`cond_encoder`, added: `embed`), then the reference image's tokens (the model's
own patch embedding) and the frame packer's motion tokens (none for a clip given no motion
latents: the release's first clip), appended with their own RoPE positions and modulated by
timestep 0 (`extra_tokens`); each token gets the `trainable_cond_mask` vector of its kind
(`TOKEN_KINDS`). The audio injectors run after the blocks `injector_slots` names, on the video
tokens only; the head reads the video tokens only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.embeddings import PatchEmbed
from wanjax.adapters.jax.transformer.extension import ExtraTokens, NoExtensionHooks
from wanjax.adapters.jax.transformer.rope import RopeTables, position_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.audio_encoder import AudioTokens, CausalAudioEncoder
from wanjax.adapters.jax.transformer.s2v.audio_injector import injector_slots, injector_stack
from wanjax.adapters.jax.transformer.s2v.frame_pack import FramePackMotioner
from wanjax.adapters.jax.transformer.s2v.positions import reference_positions
from wanjax.adapters.jax.transformer.stacking import with_slot
from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.s2v_spec import LATENT_MOTION_FRAMES, MOTION_FRAMES, S2VSpec
from wanjax.domain.specs import TransformerSpec

TOKEN_KINDS = ("video", "reference", "motion")
"""The rows of `trainable_cond_mask`, in order: the ids `WanModel_S2V.forward` gives each token."""
NEEDED = ("audio", "pose", "reference")
"""The inputs every clip needs; "motion" is optional (absent: no motion tokens)."""


class S2VInputs(NamedTuple):
    """What an S2V transformer's steps read besides the latents, per guidance row: the pose tokens
    plus the video kind vector [B, S, D], the clip's audio tokens, the reference and motion latents
    (None: no motion tokens), and the RoPE tables [E, H/2] of the appended tokens (numpy: static,
    made of their positions alone)."""

    pose: jax.Array
    audio: AudioTokens
    reference: jax.Array
    motion: jax.Array | None
    rope: RopeTables


class S2VBranch(NoExtensionHooks, nnx.Module):
    """The S2V modules: audio encoder and injectors, frame packer, pose encoder, token-kind vectors."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.casual_audio_encoder = CausalAudioEncoder(spec, s2v, runtime, rngs=rngs)  # sic: the official name
        self.audio_injector = injector_stack(spec, s2v, runtime, rngs=rngs)
        self.frame_packer = FramePackMotioner(spec, s2v, runtime, rngs=rngs)
        self.cond_encoder = PatchEmbed(spec, runtime, s2v.cond_dim, rngs=rngs)
        self.trainable_cond_mask = nnx.Embed(
            len(TOKEN_KINDS), spec.inner_dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.spec, self.s2v, self.dtype = spec, s2v, runtime.dtype

    def kind_vectors(self, video: int, reference: int, motion: int) -> jax.Array:
        """[video + reference + motion, D]: each token's `trainable_cond_mask` row, to add to the tokens."""
        kinds = np.repeat(np.arange(len(TOKEN_KINDS)), (video, reference, motion))
        return self.trainable_cond_mask(jnp.asarray(kinds))

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> S2VInputs:
        """inputs "audio" [B, T, 25, C_a] (T = 4 F, the clip's frames), "pose" [B, F, H, W, cond_dim],
        "reference" [B, 1, H, W, 16], optionally "motion" [B, T_m, H, W, 16], beside latents
        [B, F, H, W, C]."""
        missing = [name for name in NEEDED if name not in inputs]
        if missing:
            raise ValueError(f"an S2V transformer needs its s2v inputs {list(NEEDED)} (and motion after clip 0), "
                             f"missing {missing}")
        b, f, h, w = latent_shape[:4]
        pose, reference = inputs["pose"].astype(self.dtype), inputs["reference"].astype(self.dtype)
        if tuple(pose.shape) != (b, f, h, w, self.s2v.cond_dim) or tuple(reference.shape)[:4] != (b, 1, h, w):
            raise ValueError(
                f"an S2V clip of latents {tuple(latent_shape)} needs pose latents [B, F, H, W, {self.s2v.cond_dim}] "
                f"and reference latents [B, 1, H, W, C], got {tuple(pose.shape)} and {tuple(reference.shape)}"
            )
        motion = inputs.get("motion")
        audio = self.casual_audio_encoder.clip_tokens(inputs["audio"], MOTION_FRAMES, LATENT_MOTION_FRAMES)
        if audio.tokens.shape[1] != f:
            raise ValueError(f"the audio features make {audio.tokens.shape[1]} latent frames, the clip has {f}")
        pose_tokens = self.cond_encoder(pose).reshape(b, -1, self.spec.inner_dim)
        pose_tokens = pose_tokens + self.kind_vectors(pose_tokens.shape[1], 0, 0)[None]
        grid = (f, h // self.spec.patch_size[1], w // self.spec.patch_size[2])
        positions = [reference_positions(grid)]
        if motion is not None:
            motion = motion.astype(self.dtype)
            positions.append(self.frame_packer.positions(h, w))
        rope = position_tables(self.spec.attention_head_dim, np.concatenate(positions))
        return S2VInputs(pose_tokens, audio, reference, motion, rope)

    def embed(self, x: jax.Array, prepared: S2VInputs) -> jax.Array:
        """The video tokens x [B, S, D] plus the pose tokens and the video kind vector."""
        return x + prepared.pose.astype(x.dtype)

    def extra_tokens(self, prepared: S2VInputs, patch_embed: Callable[[jax.Array], jax.Array]) -> ExtraTokens:
        """The reference image's tokens, then the motion tokens, each with its kind vector, at
        timestep 0 with `zero_timestep` (the release)."""
        b, dim = prepared.reference.shape[0], self.spec.inner_dim
        reference = patch_embed(prepared.reference).reshape(b, -1, dim)
        parts = [reference]
        if prepared.motion is not None:
            parts.append(self.frame_packer(prepared.motion))
        tokens = jnp.concatenate(parts, axis=1)
        motion = tokens.shape[1] - reference.shape[1]
        tokens = tokens + self.kind_vectors(0, reference.shape[1], motion)[None].astype(tokens.dtype)
        return ExtraTokens(tokens, prepared.rope, self.s2v.zero_timestep)

    def before_blocks(
        self,
        x: jax.Array,
        prepared: S2VInputs,
        kv: CrossAttentionKV | None,
        temb6: jax.Array,
        rope: RopeTables,
        attention: AttentionCall,
    ) -> tuple[AudioTokens, jax.Array]:
        """The audio tokens the injectors read, and a [E] marker whose length says how many tokens
        after the video's the sequence holds (the injectors touch the video tokens only)."""
        return prepared.audio, jnp.zeros(len(prepared.rope.cos), jnp.int8)

    def layer_slots(self) -> np.ndarray:
        return injector_slots(self.spec, self.s2v)

    def after_block(self, x: jax.Array, held: tuple[AudioTokens, jax.Array], slot: jax.Array | int) -> jax.Array:
        audio, extra = held
        video = x.shape[1] - extra.shape[0]
        return with_slot(x, self.audio_injector, slot, lambda injector, x: injector(x, audio, video))
