"""A request's LoRAs merged on the device into a copy of the parameters they change.

Each changed tensor (one layer of a stacked parameter, or a whole parameter) is computed as the
load-time merge computes it (`adapters/lora/merge.py`): W in float32, plus scale * factor * up @
down (or scale * factor * diff) for every delta in order, then cast to W's storage dtype (an fp8
kernel is quantised by the same cast as at load). One executable per tensor shape, layout and
delta ranks serves every layer and every LoRA of those ranks; layers, scales and factors are
arguments, so a new scale compiles nothing. A stacked parameter's layers are merged one after
the other into one copy inside one executable (a float32 temporary the size of one layer, not of
the stack). Parameters no LoRA touches are the base arrays themselves. A quantized kernel (GGUF
blocks, scaled fp8) is not merged: it keeps its LoRAs' factors beside it (`quantized.LoraKernel`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.lora.factors import DeviceDelta, DeviceLora
from wanjax.adapters.jax.lora.quantized import Terms, lora_kernel
from wanjax.adapters.jax.platform.compiled import CompiledFunction
from wanjax.adapters.jax.transformer.packed_weights import STORED_KERNELS
from wanjax.adapters.jax.transformer.weight_names import Path, Slot


def merged_tensor(
    base: jax.Array, terms: tuple[tuple[jax.Array, jax.Array | None, np.float32, np.float32], ...],
    torch_shape: tuple[int, ...], to_jax: tuple[int, ...] | None,
) -> jax.Array:  # fmt: skip
    """base (JAX layout) + sum of scale * factor * up @ down, each term (up, down, factor, scale)
    in float32, then cast to base's dtype. The product is made in an order close to base's layout
    (for a linear kernel exactly it): transposing a full-size product costs more than the product."""
    target = tuple(range(len(torch_shape))) if to_jax is None else to_jax  # torch axes in base's order
    merged = base.astype(jnp.float32)
    for up, down, factor, scale in terms:
        if down is None:
            dense, axes = factor * up, tuple(range(len(torch_shape)))
        else:  # [*torch_shape[1:], out]
            product = jnp.tensordot(down.reshape(down.shape[0], *torch_shape[1:]), up.reshape(up.shape[0], -1), ((0,), (1,)))
            dense, axes = factor * product, (*range(1, len(torch_shape)), 0)
        order = tuple(axes.index(axis) for axis in target)
        merged = merged + scale * (dense if order == tuple(range(len(order))) else dense.transpose(order))
    return merged.astype(base.dtype)


def merged_parameter(
    base: jax.Array, layers: jax.Array | None, terms: tuple[tuple[Any, ...], ...], *,
    torch_shape: tuple[int, ...], to_jax: tuple[int, ...] | None,
) -> jax.Array:  # fmt: skip
    """A copy of `base` with its target tensors merged (`merged_tensor`): the whole parameter
    (`layers` None, one entry of `terms`), or the layers `layers` [n] of a stacked one, one
    entry of `terms` each, written in place one after the other."""
    if layers is None:
        return merged_tensor(base, terms[0], torch_shape, to_jax)
    for i, layer_terms in enumerate(terms):
        tensor = merged_tensor(jax.lax.dynamic_index_in_dim(base, layers[i], keepdims=False), layer_terms, torch_shape, to_jax)
        base = jax.lax.dynamic_update_index_in_dim(base, tensor, layers[i], axis=0)
    return base


class ParameterMerges:
    """The merge executables of one model: one per parameter shape, layout, number of target
    layers and delta ranks, whatever the layers, factors and scales."""

    def __init__(self) -> None:
        self._merges: dict[tuple[tuple[int, ...], tuple[int, ...] | None], CompiledFunction] = {}

    @property
    def num_compiled(self) -> int:
        return sum(f.num_compiled for f in self._merges.values())

    def parameter(self, base: jax.Array, targets: Sequence[tuple[Slot, Terms]]) -> jax.Array:
        """`base` with every target tensor merged: the whole parameter, or layers of a stacked one."""
        first = targets[0][0]
        shape = base.shape if first.layer is None else base.shape[1:]
        torch_shape = shape if first.to_jax is None else tuple(shape[i] for i in np.argsort(first.to_jax))
        key = (tuple(torch_shape), first.to_jax)
        if key not in self._merges:
            self._merges[key] = CompiledFunction(functools.partial(merged_parameter, torch_shape=key[0], to_jax=key[1]))
        layers = None if first.layer is None else np.asarray([slot.layer for slot, _ in targets], np.int32)
        terms = tuple(tuple((d.up, d.down, d.factor, scale) for d, scale in slot_terms) for _, slot_terms in targets)
        return jax.device_put(self._merges[key](base, layers, terms), base.sharding)  # a no-op on one device


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
    merged = {path: _merged(variable.get_value(), by_parameter[path], merges)
              for path, variable in flat if path in by_parameter}  # fmt: skip
    return nnx.from_flat_state([(path, v.replace(merged[path]) if path in merged else v) for path, v in flat])


def _merged(base: Any, targets: Sequence[tuple[Slot, Terms]], merges: ParameterMerges) -> Any:
    """A merged copy of parameter `base`; a quantized kernel kept so, with the factors beside it."""
    if isinstance(base, STORED_KERNELS):
        return lora_kernel(base, targets)
    return merges.parameter(base, targets)
