"""A request's LoRAs merged on the device into a copy of the parameters they change.

Each changed tensor (one layer of a stacked parameter, or a whole parameter) is computed as the
load-time merge computes it (`adapters/lora/merge.py`): W in float32, plus scale * factor * up @
down (or scale * factor * diff) for every delta in order, then cast to W's storage dtype (an fp8
kernel is quantised by the same cast as at load). One executable per tensor shape, layout and
delta ranks serves every layer and every LoRA of those ranks; scales and factors are arguments,
so a new scale compiles nothing. Parameters no LoRA touches are the base arrays themselves.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.lora.factors import DeviceDelta, DeviceLora
from wanjax.adapters.jax.platform.compiled import CompiledFunction
from wanjax.adapters.jax.transformer.weight_names import Path, Slot

Terms = tuple[tuple[DeviceDelta, np.float32], ...]  # each delta with its LoRA's scale, in order


def merged_tensor(
    base: jax.Array, terms: tuple[tuple[jax.Array, jax.Array | None, jax.Array, jax.Array], ...],
    *, torch_shape: tuple[int, ...], to_jax: tuple[int, ...] | None,
) -> jax.Array:  # fmt: skip
    """base (JAX layout) + sum of scale * factor * up @ down, each term (up, down, factor, scale)
    computed in torch layout, in float32, then cast to base's dtype."""
    merged = base.astype(jnp.float32)
    for up, down, factor, scale in terms:
        if down is None:
            dense = factor * up
        else:
            dense = (factor * (up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1))).reshape(torch_shape)
        merged = merged + scale * (dense if to_jax is None else dense.transpose(to_jax))
    return merged.astype(base.dtype)


def with_layers(stack: jax.Array, layers: jax.Array, tensors: tuple[jax.Array, ...]) -> jax.Array:
    """A copy of `stack` [L, ...] with `tensors` at `layers`."""
    return stack.at[layers].set(jnp.stack(tensors))


class ParameterMerges:
    """The merge executables of one model, compiled once per shape, layout and ranks."""

    def __init__(self) -> None:
        self._tensor: dict[tuple[tuple[int, ...], tuple[int, ...] | None], CompiledFunction] = {}
        self._layers = CompiledFunction(with_layers)

    @property
    def num_compiled(self) -> int:
        return self._layers.num_compiled + sum(f.num_compiled for f in self._tensor.values())

    def tensor(self, base: jax.Array, slot: Slot, terms: Terms) -> jax.Array:
        torch_shape = base.shape if slot.to_jax is None else tuple(base.shape[i] for i in np.argsort(slot.to_jax))
        key = (tuple(torch_shape), slot.to_jax)
        if key not in self._tensor:
            self._tensor[key] = CompiledFunction(functools.partial(merged_tensor, torch_shape=key[0], to_jax=slot.to_jax))
        arguments = tuple((d.up, d.down, jnp.float32(d.factor), jnp.float32(scale)) for d, scale in terms)
        return self._tensor[key](base, arguments)

    def parameter(self, base: jax.Array, targets: Sequence[tuple[Slot, Terms]]) -> jax.Array:
        """`base` with every target tensor merged: the whole parameter, or layers of a stacked one."""
        if targets[0][0].layer is None:
            merged = self.tensor(base, *targets[0])
        else:
            layers = jnp.asarray([slot.layer for slot, _ in targets], jnp.int32)
            merged = self._layers(base, layers, tuple(self.tensor(base[slot.layer], slot, terms) for slot, terms in targets))
        return jax.device_put(merged, base.sharding)  # where the compiled step expects it (a no-op on one device)


def merged_parameters(
    base: nnx.State, slots: Mapping[str, Slot], loras: Sequence[tuple[DeviceLora, float]], merges: ParameterMerges
) -> nnx.State:
    """`base` (one expert's parameters) with `loras` (each with its scale, in order) merged into a
    copy of every parameter they change; every other parameter is base's own array."""
    terms: dict[str, list[tuple[DeviceDelta, np.float32]]] = {}
    for lora, scale in loras:
        for target, deltas in lora.deltas.items():
            terms.setdefault(target, []).extend((delta, np.float32(scale)) for delta in deltas)
    by_parameter: dict[Path, list[tuple[Slot, Terms]]] = {}
    for target, items in terms.items():
        slot = slots[target]
        by_parameter.setdefault(slot.path, []).append((slot, tuple(items)))
    flat = list(nnx.to_flat_state(base))
    merged = {path: merges.parameter(variable.get_value(), by_parameter[path])
              for path, variable in flat if path in by_parameter}  # fmt: skip
    return nnx.from_flat_state([(path, v.replace(merged[path]) if path in merged else v) for path, v in flat])
