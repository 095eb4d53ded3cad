"""Wan 2.1 VACE's model side as one transformer extension: the VACE branch (control latents ->
hints added after the base blocks `vace_layers` names), its diffusers names, its sharding rules
(its blocks are a stack named "blocks", sharded and stored as the base blocks)."""

from __future__ import annotations

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.adapters.jax.transformer.vace.branch import VaceBranch
from wanjax.adapters.jax.transformer.vace.weight_names import vace_slots
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.sharding import EMBED

VACE_TRANSFORMER_EXTENSION = TransformerExtension(
    model=VACE_EXTENSION,
    build=lambda spec, runtime, rngs: VaceBranch(spec, runtime, rngs=rngs),
    weights=vace_slots,
    rules=ParameterRules(table=((("vace", "proj_in", "kernel"), (EMBED, None)),)),
)
