"""SkyReels-V2's fps embedding as a transformer extension: its module, its diffusers names, and
its sharding (small: every device keeps it whole)."""

from __future__ import annotations

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.adapters.jax.transformer.fps.embedding import FpsEmbedding
from wanjax.adapters.jax.transformer.weight_names import Entry, Slot, linear_entries
from wanjax.domain.extensions.fps import FPS_EXTENSION
from wanjax.domain.specs import TransformerSpec


def fps_slots(spec: TransformerSpec, scan_layers: bool) -> list[Slot]:
    """`fps_embedding` (the table) and `fps_projection` (diffusers' FeedForward: net.0.proj, then net.2)."""
    entries = [
        Entry("fps_embedding.weight", ("fps", "table")),
        *linear_entries("fps_projection.net.0.proj", ("fps", "proj_in")),
        *linear_entries("fps_projection.net.2", ("fps", "proj_out")),
    ]
    return [Slot(e.name, e.path, None, e.to_jax) for e in entries]


FPS_TRANSFORMER_EXTENSION = TransformerExtension(
    model=FPS_EXTENSION,
    build=lambda spec, runtime, rngs: FpsEmbedding(spec, runtime, rngs=rngs),
    weights=fps_slots,
    rules=ParameterRules(replicated=("fps",)),
)
