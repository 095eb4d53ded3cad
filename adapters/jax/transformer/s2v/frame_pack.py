"""S2V's frame-pack motioner (the official `FramePackMotioner`): the previous clip's last motion
latents -> extra tokens appended after the reference tokens, nearer frames at finer resolution.

Of the last 19 latent frames (fewer are zero-padded in front), the nearest 1 is patch-embedded
like the video (1, 2, 2), the next 2 at (2, 4, 4) and the farthest 16 at (4, 8, 8), each by its
own Conv3d: H'W' + H'W'/4 + 4 H'W'/16 tokens for an H' x W' token grid, in that order. Their RoPE
frames are negative (-1; -3; -19, -14, -9, -4) and their rows and columns spread over the
full token grid (positions.py). Conv3d drops what does not fill a patch: so do these.

`add_last_motion` (2 at inference: the model config's flag times `forward`'s default) leaves out
the nearest groups when lower: with drop mode "drop" their tokens go, with "padd" their frames
are zeroed and the tokens stay.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.embeddings import PatchEmbed
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.positions import block_positions
from wanjax.domain.s2v_spec import FRAME_PACK_BUCKETS, FRAME_PACK_CHANNELS, FRAME_PACK_PATCHES, S2VSpec
from wanjax.domain.specs import TransformerSpec


class FramePackMotioner(nnx.Module):
    """Motion latents [B, T_m, H, W, 16] -> motion tokens [B, M, D] and their RoPE positions."""

    def __init__(self, spec: TransformerSpec, s2v: S2VSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        def embed(patch: tuple[int, int, int]) -> PatchEmbed:
            return PatchEmbed(spec, runtime, FRAME_PACK_CHANNELS, patch_size=patch, rngs=rngs)

        self.proj, self.proj_2x, self.proj_4x = (embed(patch) for patch in FRAME_PACK_PATCHES)
        self.drops_tokens = s2v.framepack_drop_mode == "drop"
        self.dim = spec.inner_dim

    def __call__(self, motion_latents: jax.Array, add_last_motion: int = 2) -> jax.Array:
        """motion_latents [B, T_m, H, W, 16] -> [B, M, D] in (nearest, 2x, 4x) order."""
        b, frames, h, w, c = motion_latents.shape
        total = sum(FRAME_PACK_BUCKETS)
        packed = jnp.zeros((b, total, h, w, c), motion_latents.dtype)
        kept = min(total, frames)
        packed = packed.at[:, total - kept :].set(motion_latents[:, frames - kept :])
        if add_last_motion < 2 and not self.drops_tokens:
            zeroed = sum(FRAME_PACK_BUCKETS[: len(FRAME_PACK_BUCKETS) - add_last_motion - 1])
            packed = packed.at[:, total - zeroed :].set(0)
        far, mid, near = jnp.split(packed, np.cumsum(FRAME_PACK_BUCKETS[::-1])[:-1], axis=1)  # 16, 2, 1 frames
        tokens = []
        for group, (proj, patch) in enumerate(zip((self.proj, self.proj_2x, self.proj_4x), FRAME_PACK_PATCHES)):
            if self._dropped(group, add_last_motion):
                continue
            latents = (near, mid, far)[group]
            latents = latents[:, :, : h // patch[1] * patch[1], : w // patch[2] * patch[2]]  # Conv3d's floor
            tokens.append(proj(latents).reshape(b, -1, self.dim))
        return jnp.concatenate(tokens, axis=1)

    def positions(self, height: int, width: int, add_last_motion: int = 2) -> np.ndarray:
        """[M, 3] RoPE positions of the motion tokens of [.., H, W, ..] motion latents."""
        blocks = []
        start = 0
        for group, (bucket, patch) in enumerate(zip(FRAME_PACK_BUCKETS, FRAME_PACK_PATCHES)):
            start -= bucket
            if self._dropped(group, add_last_motion):
                continue
            end = (start + bucket // patch[0], height // patch[1], width // patch[2])
            blocks.append(block_positions((start, 0, 0), end, (bucket, height // 2, width // 2)))
        return np.concatenate(blocks)

    def _dropped(self, group: int, add_last_motion: int) -> bool:
        """Whether group (0 nearest, 1 the 2x, 2 the 4x) has no tokens: in drop mode, below its level."""
        return self.drops_tokens and group < 2 and add_last_motion < 2 - group
