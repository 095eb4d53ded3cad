"""ComfyUI's and kijai's "scaled fp8" safetensors: weights in float8_e4m3fn, each with a per-tensor
float32 `scale_weight` beside it, and a `scaled_fp8` marker tensor.

A weight `X.weight` stored in fp8 with `X.scale_weight` is worth `X.weight` (as float32) times
`X.scale_weight`. `ScaledFp8Weights` shows a file's tensors without the scales, markers and input
scales (`X.scale_input`, for the fp8 matmuls ComfyUI may run; wanjax's own `matmul_dtype` scales
its operands itself): a scaled weight comes back dequantized, as any mapping's tensors; through
`block_type` / `packed` / `scale` a 2-D one also reads as its fp8 values and scale, which the
transformer and the JAX text encoder keep as they are on the device (`ScaledKernel`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import ml_dtypes
import numpy as np

from wanjax.adapters.checkpoints.safetensors_file import FileIdentity
from wanjax.adapters.checkpoints.weights import TensorFiles
from wanjax.domain.errors import UnsupportedModelError
from wanjax.domain.quantization import SCALED_FP8

MARKER = "scaled_fp8"
_EXTRAS = (".scale_weight", ".scale_input")


def is_scaled_fp8(names: Mapping[str, object]) -> bool:
    return MARKER in names or any(name.endswith(".scale_weight") for name in names)


def _scale_name(name: str) -> str | None:
    return name[: -len("weight")] + "scale_weight" if name.endswith(".weight") else None


class ScaledFp8Weights(Mapping[str, np.ndarray]):
    """A scaled fp8 file's tensors, dequantized where scaled (see the module)."""

    def __init__(self, source: Mapping[str, np.ndarray], location: object) -> None:
        self._source = source
        self._names = [n for n in source if n != MARKER and not n.endswith(_EXTRAS)]
        self._names_set = set(self._names)
        self._scaled = {n: s for n in self._names if (s := _scale_name(n)) in source}
        for name, scale in self._scaled.items():
            dtype, size = source[name].dtype, source[scale].size
            if dtype not in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)) or size != 1:
                raise UnsupportedModelError(
                    f"{location}: {name!r} ({dtype}) has a scale_weight of {size} values; wanjax reads scaled fp8 "
                    "files with one scale per float8 tensor (ComfyUI's, kijai's): use the file's bf16 release"
                )

    def shape(self, name: str) -> tuple[int, ...]:
        """Tensor `name`'s shape, without dequantizing it."""
        return tuple(self._source[name].shape)

    def scale(self, name: str) -> np.float32:
        """The float32 scale of scaled weight `name`."""
        return np.float32(self._source[self._scaled[name]].reshape(()))

    def block_type(self, name: str) -> str | None:
        """`SCALED_FP8` for a scaled e4m3 weight of two dimensions (kept as it is); None otherwise."""
        scaled = name in self._scaled and self._source[name].dtype == np.dtype(ml_dtypes.float8_e4m3fn)
        return SCALED_FP8 if scaled and self._source[name].ndim == 2 else None

    def packed(self, name: str) -> np.ndarray:
        """Scaled weight `name` as stored: its fp8 values (times `scale(name)` it is the weight)."""
        return self._source[name]

    def block_kernel_bytes(self) -> float | None:
        return 1.0 if any(n.startswith("blocks.") and self.block_type(n) for n in self._scaled) else None

    def locate(self, name: str) -> str:
        return self._source.locate(name) if isinstance(self._source, TensorFiles) else repr(name)

    def release(self, name: str) -> None:
        if isinstance(self._source, TensorFiles):
            self._source.release(name)

    def identity(self) -> tuple[FileIdentity, ...]:
        return self._source.identity() if isinstance(self._source, TensorFiles) else ()

    def byte_offset(self, name: str) -> tuple[str, int]:
        return self._source.byte_offset(name) if isinstance(self._source, TensorFiles) else ("", 0)

    def parameter_count(self) -> int:
        return sum(int(np.prod(self._source[n].shape)) for n in self._names)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._scaled:
            if name == MARKER or name.endswith(_EXTRAS):
                raise KeyError(name)
            return self._source[name]
        return self._source[name].astype(np.float32) * self.scale(name)

    def __contains__(self, name: object) -> bool:  # without reading (dequantizing) the tensor
        return name in self._names_set

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
