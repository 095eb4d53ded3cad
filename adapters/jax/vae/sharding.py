"""Spatial sharding of the VAE: activations [B, F, H, W, C] split over a mesh along H (and W).

The batch axis is redundant (replicated: every device holds every video of the batch)
and so are the parameters, which are small; only the activations, which at 720p are
the VAE's memory, are split. Convolutions then need a halo of neighbouring rows at
every seam: XLA's SPMD partitioner inserts those exchanges (collective-permutes) by
itself once the layout is pinned at a few points: the input latents, every temporal
chunk's input, output and cache, and the output frames, which end replicated so that
every process can read them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from wanjax.domain.errors import ConfigError

Constrain = Callable[[Any], Any]
"""Pins the layout of every video array [B, F, H, W, C] in a pytree; other leaves pass through."""


class SpatialSharding:
    """Splits VAE activations over every device of `mesh`, by rows where the height allows.

    The mesh axes are given to the height, the width, or divided between them (a leading
    run to the height, the rest to the width), whichever first divides the latent grid:
    all to the height, then fewer and fewer to it. Latent sizes then divide at every
    resolution of the decoder, each a multiple of the latent one.
    """

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self._axes = tuple(name for name, size in mesh.shape.items() if size > 1)

    def layout(self, height: int, width: int) -> PartitionSpec:
        """The PartitionSpec of [B, F, H, W, C] for a latent grid of `height` x `width`.

        Raises ConfigError when no arrangement of the mesh axes divides the grid.
        """
        for split in range(len(self._axes), -1, -1):
            rows, cols = self._axes[:split], self._axes[split:]
            if height % self._size(rows) == 0 and width % self._size(cols) == 0:
                return PartitionSpec(None, None, rows or None, cols or None, None)
        sizes = ", ".join(f"{name}={size}" for name, size in self.mesh.shape.items())
        raise ConfigError(
            f"VAE spatial sharding: the latent grid {height} x {width} does not split over the mesh ({sizes}): "
            f"the latent height (or width) must be a multiple of {self.mesh.size}, or the height of a leading "
            "part of the mesh axes and the width of the rest; pick a video height/width whose latent size "
            "divides, or a mesh with fewer devices"
        )

    def _size(self, axes: tuple[str, ...]) -> int:
        return math.prod(self.mesh.shape[name] for name in axes)

    def constrainer(self, latents_shape: tuple[int, ...]) -> Constrain:
        """The `Constrain` for decoding latents of `latents_shape` [B, F', H', W', C]."""
        sharding = NamedSharding(self.mesh, self.layout(*latents_shape[2:4]))

        def constrain(tree: Any) -> Any:
            return jax.tree.map(
                lambda x: jax.lax.with_sharding_constraint(x, sharding) if getattr(x, "ndim", 0) == 5 else x,
                tree,
            )

        return constrain

    @property
    def replicated(self) -> NamedSharding:
        """Parameters and output frames: a full copy on every device of the mesh."""
        return NamedSharding(self.mesh, PartitionSpec())
