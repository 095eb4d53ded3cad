"""Wan 2.2 Animate's model side as one transformer extension: the Animate branch (pose tokens
added to the video tokens, a face adapter after every `inject_face_latents_blocks`-th base
block), its diffusers names, its sharding rules (the face adapters are a layer stack, sharded and
stored in fp8 as the blocks; the face-video encoders, 41M parameters at Animate-14B run once per
segment on a few frames, stay whole on every device and keep the model's dtype)."""

from __future__ import annotations

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.animate.branch import AnimateBranch
from wanjax.adapters.jax.transformer.animate.weight_names import animate_slots
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.domain.extensions.animate import ANIMATE_EXTENSION
from wanjax.domain.sharding import EMBED

ANIMATE_TRANSFORMER_EXTENSION = TransformerExtension(
    model=ANIMATE_EXTENSION,
    build=lambda spec, runtime, rngs: AnimateBranch(spec, runtime, rngs=rngs),
    weights=animate_slots,
    rules=ParameterRules(
        table=(
            (("face_adapter", ("norm_q", "norm_k"), "scale"), (None,)),  # per head dim, shared by the heads
            (("pose_patch_embedding", "kernel"), (None, None, None, None, EMBED)),
        ),
        replicated=("motion_encoder", "face_encoder"),
        stacks=("face_adapter",),
    ),
)
