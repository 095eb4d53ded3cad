"""Wan VAE weights in diffusers' names and torch layouts <-> `WanVAE` parameters.

Module attributes mirror diffusers' names, so a parameter's diffusers name is its
NNX path joined by dots, with one exception: diffusers wraps the resample conv in an
`nn.Sequential` after the up/down-sampling op, hence `resample.1`. `_torch_layout`
below is the single mapping; loading and export both use it.
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


def _torch_layout(path: tuple[str | int, ...], ndim: int) -> tuple[str, tuple[int, ...]]:
    """NNX parameter path -> (diffusers tensor name, axes taking the torch array to ours).

    Conv kernels: torch [out, in, *k] -> ours [*k, in, out]. Norm gammas: torch
    [C, 1, ...] -> ours [..., 1, C]. Biases keep their layout.
    """
    parts: list[str] = []
    for part in path:
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
    return ".".join(parts), axes


def _listing(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def load_vae(spec: VaeSpec, runtime: VaeRuntime, tensors: Mapping[str, np.ndarray]) -> WanVAE:
    """Builds a `WanVAE` from diffusers-named tensors (torch layouts), cast to `param_dtype`.

    The module is built abstractly, so no random weights are materialised. Raises
    CheckpointError naming the tensors when any is missing, unexpected or misshapen.
    """
    abstract = nnx.eval_shape(lambda: WanVAE(spec, runtime, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    targets = {}
    for path, variable in nnx.to_flat_state(state):
        name, axes = _torch_layout(path, len(variable.shape))
        targets[name] = (path, variable, axes)
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
    for name, (path, variable, axes) in targets.items():
        tensor = tensors[name]
        expected = tuple(variable.shape[i] for i in np.argsort(axes))
        if tuple(tensor.shape) != expected:
            raise CheckpointError(
                f"VAE tensor {name}: expected shape {expected}, found {tuple(tensor.shape)}; "
                "check that config.json matches the weights"
            )
        value = jnp.asarray(np.transpose(tensor, axes), dtype=runtime.param_dtype)
        filled.append((path, variable.replace(value)))
    return nnx.merge(graphdef, nnx.from_flat_state(filled))


def export_vae_weights(model: WanVAE) -> dict[str, np.ndarray]:
    """The inverse of `load_vae`: diffusers names -> numpy arrays in torch layouts."""
    tensors = {}
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = np.asarray(variable[...])
        name, axes = _torch_layout(path, value.ndim)
        tensors[name] = np.ascontiguousarray(np.transpose(value, np.argsort(axes)))
    return tensors
