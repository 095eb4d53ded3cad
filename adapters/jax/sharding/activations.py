"""Activation sharding: the layout the model pins its activations to at a few points with
`with_sharding_constraint` (after the patch embedding, after each block, before the head,
the cross-attention K/V), so that XLA's partitioner keeps tokens split over "context" and
rows over "data" x "fsdp" instead of choosing on its own."""

from __future__ import annotations

import attrs
import jax
from jax.sharding import Mesh, NamedSharding

from wanjax.adapters.jax.sharding.rules import partition_spec
from wanjax.domain.sharding import LogicalRules


@attrs.frozen
class ActivationSharding:
    """A mesh and its logical axis rules; hashable, so it can sit in a model's static graph."""

    mesh: Mesh
    rules: LogicalRules

    def named(self, x: jax.Array | jax.ShapeDtypeStruct, *logical: str | None) -> NamedSharding:
        """The sharding of an array of x's shape whose dimensions have these logical names."""
        return NamedSharding(self.mesh, partition_spec(logical, x.shape, self.mesh, self.rules))

    def constrain(self, x: jax.Array, *logical: str | None) -> jax.Array:
        """x pinned to the layout its dimensions' logical names give (one name per dimension)."""
        return jax.lax.with_sharding_constraint(x, self.named(x, *logical))


def constrain(sharding: ActivationSharding | None, x: jax.Array, *logical: str | None) -> jax.Array:
    """`sharding.constrain(x, ...)`, or x unchanged without a mesh (one device)."""
    return x if sharding is None else sharding.constrain(x, *logical)
