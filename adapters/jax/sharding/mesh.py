"""The device mesh of a `MeshShape`: named axes ("data", "fsdp", "tensor", "context") over the devices."""

from __future__ import annotations

from collections.abc import Sequence

import jax
from jax.sharding import AxisType, Mesh

from wanjax.domain.sharding import MESH_AXES, MeshShape

DATA, FSDP, TENSOR, CONTEXT = MESH_AXES
BATCH_AXES = (DATA, FSDP)
"""The mesh axes the rows (videos x CFG copies) are split over."""


def build_mesh(shape: MeshShape, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """The mesh over `devices` (default: every device of every process), its axes in `MESH_AXES`
    order. Axes are `Auto`: XLA's SPMD partitioner propagates shardings from the placed weights
    and a few `with_sharding_constraint`s. Raises ConfigError if the sizes do not use every device."""
    devices = jax.devices() if devices is None else list(devices)
    shape.check_devices(len(devices))
    return jax.make_mesh(shape.sizes, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices)
