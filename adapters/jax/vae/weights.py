"""Wan VAE weights in diffusers' names and torch layouts <-> `WanVAE` parameters.

Module attributes mirror diffusers' names, so a parameter's diffusers name is its
NNX path joined by dots, with one exception: diffusers wraps the resample conv in an
`nn.Sequential` after the up/down-sampling op, hence `resample.1`; and the per-frame
convolution form keeps a 3-D kernel as a list of its time taps (`weight.0`, `weight.1`, ...),
each one slice of diffusers' tensor. `_torch_layout` below is the single mapping; loading and
export both use it.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import VaeSpec

_LISTED = 5  # names quoted per error message
Target = tuple[tuple, nnx.Variable, int | None, tuple[int, ...]]  # path, variable, time tap, torch -> ours axes


def _torch_layout(path: tuple[str | int, ...], ndim: int) -> tuple[str, int | None, tuple[int, ...]]:
    """NNX parameter path -> (diffusers tensor name, the time tap the parameter holds or None, axes
    taking the torch array (of that tap: [:, :, tap]) to ours).

    Conv kernels: torch [out, in, *k] -> ours [*k, in, out]. Norm gammas: torch
    [C, 1, ...] -> ours [..., 1, C]. Biases keep their layout.
    """
    tap = path[-1] if isinstance(path[-1], int) else None
    parts: list[str] = []
    for part in path if tap is None else path[:-1]:
        parts.append(str(part))
        if part == "resample":
            parts.append("1")
    leaf = parts[-1]
    if leaf == "weight":
        axes = (*range(2, ndim), 1, 0)
    elif leaf == "gamma":
        axes = (*range(1, ndim), 0)
    else:
        axes = tuple(range(ndim))
    return ".".join(parts), tap, axes


def _torch_shape(entries: list[Target]) -> tuple[int, ...]:
    """The torch shape of the tensor whose parameter (or time taps) `entries` hold."""
    _, variable, tap, axes = entries[0]
    shape = tuple(variable.shape[i] for i in np.argsort(axes))
    return shape if tap is None else (*shape[:2], len(entries), *shape[2:])


def _targets(state: nnx.State) -> dict[str, list[Target]]:
    """Each diffusers tensor name with the parameters (or time taps) it fills."""
    targets: dict[str, list[Target]] = {}
    for path, variable in nnx.to_flat_state(state):
        name, tap, axes = _torch_layout(path, len(variable.shape))
        targets.setdefault(name, []).append((path, variable, tap, axes))
    return targets


def _listing(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def load_vae(spec: VaeSpec, runtime: VaeRuntime, tensors: Mapping[str, np.ndarray]) -> WanVAE:
    """Builds a `WanVAE` from diffusers-named tensors (torch layouts), cast to `param_dtype`.

    The module is built abstractly, so no random weights are materialised. Raises
    CheckpointError naming the tensors when any is missing, unexpected or misshapen.
    """
    graphdef, state = nnx.split(nnx.eval_shape(lambda: WanVAE(spec, runtime, rngs=nnx.Rngs(0))))
    targets = _targets(state)
    missing = sorted(set(targets) - set(tensors))
    unexpected = sorted(set(tensors) - set(targets))
    if missing or unexpected:
        problems = [
            f"{kind} tensors [{_listing(names)}]"
            for kind, names in (("missing", missing), ("unexpected", unexpected))
            if names
        ]
        raise CheckpointError(
            f"VAE checkpoint does not fit the VaeSpec: {'; '.join(problems)}; "
            "check that config.json matches the weights"
        )
    filled = []
    for name, entries in targets.items():
        tensor = tensors[name]
        expected = _torch_shape(entries)
        if tuple(tensor.shape) != expected:
            raise CheckpointError(
                f"VAE tensor {name}: expected shape {expected}, found {tuple(tensor.shape)}; "
                "check that config.json matches the weights"
            )
        for path, variable, tap, axes in entries:
            part = tensor if tap is None else tensor[:, :, tap]
            value = jnp.asarray(np.transpose(part, axes), dtype=runtime.param_dtype)
            filled.append((path, variable.replace(value)))
    return nnx.merge(graphdef, nnx.from_flat_state(filled))


def vae_weight_shapes(spec: VaeSpec) -> dict[str, tuple[int, ...]]:
    """Diffusers tensor names and torch-layout shapes of the VAE `spec` describes, from its abstract
    model (nothing is made)."""
    _, state = nnx.split(nnx.eval_shape(lambda: WanVAE(spec, VaeRuntime(), rngs=nnx.Rngs(0))))
    return {name: _torch_shape(entries) for name, entries in _targets(state).items()}


def export_vae_weights(model: WanVAE) -> dict[str, np.ndarray]:
    """The inverse of `load_vae`: diffusers names -> numpy arrays in torch layouts."""
    taps: dict[str, dict[int, np.ndarray]] = {}
    tensors = {}
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = np.asarray(variable[...])
        name, tap, axes = _torch_layout(path, value.ndim)
        tensor = np.transpose(value, np.argsort(axes))
        if tap is None:
            tensors[name] = np.ascontiguousarray(tensor)
        else:
            taps.setdefault(name, {})[tap] = tensor
    for name, by_tap in taps.items():
        tensors[name] = np.ascontiguousarray(np.stack([by_tap[tap] for tap in sorted(by_tap)], axis=2))
    return tensors
