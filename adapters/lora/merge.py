"""LoRAs merged into a transformer's tensor mapping before the loader reads it.

The loader takes any `Mapping[str, np.ndarray]` of diffusers-named tensors; wrapping the
checkpoint's mapping here means merged weights are what get loaded, so sampling runs
the plain model at no extra cost, and the loader needs to know nothing about LoRAs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from wanjax.adapters.lora.reader import Delta, LoraFile, read_lora
from wanjax.domain.errors import CheckpointError
from wanjax.domain.lora import LoraSpec


class LoraMergedWeights(Mapping[str, np.ndarray]):
    """`base` with every LoRA delta added to the tensor it targets.

    A targeted tensor W reads as W + sum_i scale_i * delta_i, computed in float32 and cast
    back to W's stored dtype; every other name is the base mapping's own (zero-copy)
    tensor. Construction checks every target name and shape, so a LoRA that does not
    fit fails before any weight is read.
    """

    def __init__(self, base: Mapping[str, np.ndarray], loras: Sequence[tuple[LoraFile, float]]) -> None:
        self._base = base
        self._deltas: dict[str, list[tuple[Delta, float]]] = {}
        shapes = _Shapes(base)
        for lora, scale in loras:
            for target, deltas in fitted_deltas(lora, shapes).items():
                self._deltas.setdefault(target, []).extend((delta, scale) for delta in deltas)

    def __getitem__(self, name: str) -> np.ndarray:
        tensor = self._base[name]
        deltas = self._deltas.get(name)
        if not deltas:
            return tensor
        merged = np.asarray(tensor, np.float32).copy()
        for delta, scale in deltas:
            merged += np.float32(scale) * delta.dense(merged.shape)
        return merged.astype(tensor.dtype, copy=False)

    def __contains__(self, name: object) -> bool:
        return name in self._base  # without this, Mapping would merge a tensor to answer

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)


class _Shapes(Mapping[str, tuple[int, ...]]):
    """The shapes of a tensor mapping's tensors, read as they are asked for."""

    def __init__(self, tensors: Mapping[str, np.ndarray]) -> None:
        self._tensors = tensors

    def __getitem__(self, name: str) -> tuple[int, ...]:
        if hasattr(self._tensors, "shape"):  # from the headers: a quantized tensor is not dequantized
            return tuple(self._tensors.shape(name))
        return tuple(self._tensors[name].shape)

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def fitted_deltas(lora: LoraFile, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, list[Delta]]:
    """`lora`'s deltas by the tensor they change (in file order), each checked against `shapes`
    (diffusers names -> torch shapes); a CheckpointError lists every delta that targets no tensor
    or does not fit its own."""
    fitted: dict[str, list[Delta]] = {}
    missing, misfits = [], []
    for delta in lora.deltas:
        if delta.target not in shapes:
            missing.append(f"{'/'.join(delta.keys)} -> {delta.target}")
            continue
        problem = delta.misfit(shapes[delta.target])
        if problem is not None:
            misfits.append(f"{'/'.join(delta.keys)} -> {delta.target}: {problem}")
            continue
        fitted.setdefault(delta.target, []).append(delta)
    _raise_if_any(lora, missing, misfits)
    return fitted


def with_loras(base: Mapping[str, np.ndarray], loras: Sequence[LoraSpec]) -> Mapping[str, np.ndarray]:
    """`base` itself when there are no LoRAs, else the LoRA files read and merged over it."""
    if not loras:
        return base
    return LoraMergedWeights(base, [(read_lora(spec.path), spec.scale) for spec in loras])


def _raise_if_any(lora: LoraFile, missing: list[str], misfits: list[str], limit: int = 10) -> None:
    problems = []
    for what, items in (("target no tensor of this transformer", missing), ("do not fit their tensor", misfits)):
        if items:
            shown = "; ".join(items[:limit]) + (f"; ... ({len(items) - limit} more)" if len(items) > limit else "")
            problems.append(f"{len(items)} key(s) {what}: {shown}")
    if problems:
        raise CheckpointError(
            f"LoRA {lora.path}: " + ". ".join(problems)
            + ". Check that the LoRA was made for this model (Wan 2.1 or 2.2, 1.3B / 5B / 14B, T2V or I2V, "
            "and for 2.2 A14B the right expert)"
        )
