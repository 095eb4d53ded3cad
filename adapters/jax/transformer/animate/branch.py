"""The Wan 2.2 Animate additions to a Wan 2.1 image-to-video transformer (diffusers'
WanAnimateTransformer3DModel), as one branch of the NNX model.

The latents a step sees are [B, 1 + F, H, W, C_in]: the reference (character) frame, then
the segment's F latent frames, with the reference latents and mask in their channels. Two
per-segment inputs drive them, both independent of the step, so `inputs` computes them
once (per segment, per guidance row) as `AnimateInputs`:

- the pose latents [B, F, H, W, C_lat] (the VAE-encoded pose video), patch-embedded by
  `pose_patch_embedding` and added to the tokens of frames 1..F (not the reference frame);
- the face video [B, T, S, S, 3] (T pixel frames, T' = ceil(T / 4) = F latent frames),
  through the motion encoder (one vector per pixel frame, in batches of
  `motion_batch` frames to bound memory) and the face encoder, with one zero frame of face
  tokens prepended for the reference frame: [B, 1 + F, N + 1, D], read by the face adapters.

As a transformer extension (../extension.py): `prepare` makes the `AnimateInputs`, `embed` adds
the pose tokens, and after every `inject_face_latents_blocks`-th base block its face adapter runs
(`layer_slots`, `after_block`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.animate.face_adapter import FaceAdapter, face_slots, with_face
from wanjax.adapters.jax.transformer.animate.face_encoder import FaceEncoder
from wanjax.adapters.jax.transformer.animate.motion_encoder import MotionEncoder
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.embeddings import PatchEmbed
from wanjax.adapters.jax.transformer.extension import NoExtensionHooks
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.stacking import block_stack
from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.specs import TransformerSpec

MOTION_BATCH = 8
"""Face frames per motion encoder call (diffusers' motion_encoder_batch_size): memory, not math."""


class AnimateInputs(NamedTuple):
    """What an Animate transformer's steps read besides the latents: pose tokens [B, S, D]
    (zero over the reference frame's tokens) and face tokens [B, F', N + 1, D]."""

    pose: jax.Array
    face: jax.Array


class AnimateBranch(NoExtensionHooks, nnx.Module):
    """Pose latents and a face video -> `AnimateInputs`; holds the face adapter stack."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.pose_patch_embedding = PatchEmbed(spec, runtime, spec.out_channels, rngs=rngs)
        self.motion_encoder = MotionEncoder(spec.animate, runtime, rngs=rngs)
        self.face_encoder = FaceEncoder(spec, runtime, rngs=rngs)
        self.face_adapter = block_stack(
            lambda rngs: FaceAdapter(spec, runtime, rngs=rngs),
            spec.face_adapter_count,
            scan_layers=runtime.scan_layers,
            rngs=rngs,
        )
        self.spec = spec
        self.dtype = runtime.dtype

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> AnimateInputs:
        """inputs["pose"] and inputs["face"], cast to the activation dtype: see `inputs`."""
        if set(inputs) != {"pose", "face"}:
            raise ValueError(
                "an Animate transformer needs its animate inputs (pose latents and face video), "
                f"got {sorted(inputs)}"
            )
        return self.inputs(inputs["pose"].astype(self.dtype), inputs["face"].astype(self.dtype), latent_shape)

    def embed(self, x: jax.Array, prepared: AnimateInputs) -> jax.Array:
        """x [B, S, D] plus the pose tokens."""
        return x + prepared.pose

    def before_blocks(
        self,
        x: jax.Array,
        prepared: AnimateInputs,
        kv: CrossAttentionKV | None,
        temb6: jax.Array,
        rope: RopeTables,
        attention: AttentionCall,
    ) -> jax.Array:
        """The face tokens [B, F', N + 1, D] the face adapters read."""
        return prepared.face

    def layer_slots(self) -> np.ndarray:
        return face_slots(self.spec)

    def after_block(self, x: jax.Array, face: jax.Array, slot: jax.Array | int) -> jax.Array:
        return with_face(x, self.face_adapter, face, slot)

    def inputs(self, pose_latents: jax.Array, faces: jax.Array, latent_shape: tuple[int, ...]) -> AnimateInputs:
        """pose_latents [B, F - 1, H, W, C_lat] and faces [B, T, S, S, 3] in [-1, 1] beside
        latents of `latent_shape` [B, F, H, W, C_in] (frame 0 the reference)."""
        spec, b, f, h, w = self.spec, *latent_shape[:4]
        pose_shape, face_shape = tuple(pose_latents.shape), tuple(faces.shape)
        if pose_shape != (b, f - 1, h, w, spec.out_channels):
            raise ValueError(
                f"this Animate transformer needs pose latents [B={b}, F={f - 1}, H={h}, W={w}, "
                f"C={spec.out_channels}] (one frame fewer than the latents {tuple(latent_shape)}), got {pose_shape}"
            )
        size = spec.animate.motion_encoder_size
        if len(face_shape) != 5 or face_shape[0] != b or face_shape[2:] != (size, size, 3):
            raise ValueError(
                f"this Animate transformer needs a face video [B={b}, T, {size}, {size}, 3], got {face_shape}"
            )
        face_frames = (face_shape[1] - 1) // 4 + 1  # the face encoder's two stride-2 convs
        if face_frames != f - 1:
            raise ValueError(
                f"the face video's {face_shape[1]} frames make {face_frames} latent frames, the latents have "
                f"{f - 1} after the reference: give 4 * {f - 1} - 3 face frames"
            )
        pose = self.pose_patch_embedding(pose_latents)  # [B, F' - 1, H', W', D]
        pose = jnp.pad(pose, ((0, 0), (1, 0), (0, 0), (0, 0), (0, 0)))  # nothing on the reference frame
        motion = self._motion(faces.reshape(-1, size, size, 3))  # [B * T, motion_encoder_dim]
        face = self.face_encoder(motion.reshape(b, face_shape[1], -1))  # [B, T', N + 1, D]
        face = jnp.pad(face, ((0, 0), (1, 0), (0, 0), (0, 0)))  # [B, 1 + T', N + 1, D]
        return AnimateInputs(pose.reshape(b, -1, pose.shape[-1]), face)

    def _motion(self, faces: jax.Array) -> jax.Array:
        """[N, S, S, 3] -> [N, motion_encoder_dim], MOTION_BATCH frames per motion encoder call."""
        n = faces.shape[0]
        chunks = -(-n // MOTION_BATCH)
        padded = jnp.pad(faces, ((0, chunks * MOTION_BATCH - n), (0, 0), (0, 0), (0, 0)))
        motion = jax.lax.map(self.motion_encoder, padded.reshape(chunks, MOTION_BATCH, *faces.shape[1:]))
        return motion.reshape(chunks * MOTION_BATCH, -1)[:n]
