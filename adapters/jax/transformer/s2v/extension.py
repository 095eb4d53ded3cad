"""Wan 2.2 S2V's model side as one transformer extension: the S2V branch (pose tokens added to the
video tokens, reference and motion tokens appended with their own RoPE positions, audio injectors
after the blocks `audio_inject_layers` names), its names (the official ones: diffusers has no S2V
model), its sharding rules (the audio injectors are a layer stack, sharded and stored in fp8 as
the blocks; the audio encoder, frame packer, pose encoder and kind vectors, about 120M parameters
at S2V-14B run once per step on few tokens, stay whole on every device)."""

from __future__ import annotations

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.adapters.jax.transformer.s2v.branch import S2VBranch
from wanjax.adapters.jax.transformer.s2v.weight_names import s2v_slots
from wanjax.domain.extensions.s2v import S2V_EXTENSION
from wanjax.domain.sharding import EMBED

S2V_TRANSFORMER_EXTENSION = TransformerExtension(
    model=S2V_EXTENSION,
    build=lambda spec, runtime, rngs: S2VBranch(spec, spec.s2v, runtime, rngs=rngs),
    weights=lambda spec, scan_layers: s2v_slots(spec, spec.s2v, scan_layers=scan_layers),
    rules=ParameterRules(
        table=((("adain", "kernel"), (EMBED, None)), (("adain", "bias"), (None,))),
        replicated=("casual_audio_encoder", "frame_packer", "cond_encoder", "trainable_cond_mask"),
        stacks=("audio_injector",),
    ),
)
