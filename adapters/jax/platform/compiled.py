"""Ahead-of-time compilation keyed by argument shapes, so compile time is its own phase."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax


def xla_options() -> dict[str, str]:
    """XLA options for the project's executables (the denoiser's and the VAE's): on CPU, no YNNPACK.

    This jaxlib hands CPU dots and convolutions (with the softmax around attention's) to YNNPACK by
    default; XLA's own emitters cost less CPU time for both models. The Wan step (1.3B architecture,
    4 layers, same run as diffusers): fp32 0.82 of diffusers' CPU time instead of 0.91, bf16 9.1 s
    instead of 10.9 s. The Wan 2.1 VAE decode at 832x480x9: 0.65 of diffusers' CPU time instead of
    0.85 (at 81 frames 0.60, where YNNPACK's was 1.05), its top-level 3x3x3 convolutions 1.04x
    torch's instead of 1.37x, and its resident memory 1.00-1.05x XLA's buffer assignment instead
    of 1.35x (YNNPACK's workspaces live outside it; docs/performance.md). XLA's dots then round by their shape: code that must match another path
    bit for bit runs the same dots (`stacked_key_values`).
    """
    return {"xla_cpu_experimental_ynn_fusion_type": ""} if jax.default_backend() == "cpu" else {}


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    leaves, treedef = jax.tree.flatten(args)
    return (treedef, *((jax.numpy.shape(x), jax.numpy.result_type(x)) for x in leaves))


class CompiledFunction:
    """A jitted function whose executables are compiled explicitly (`prepare`) and reused. Threads
    may call it at once: each shape compiles once (compiles wait for one another, runs do not)."""

    def __init__(self, fn: Callable[..., Any], **jit_kwargs: Any) -> None:
        self._jitted = jax.jit(fn, **jit_kwargs)
        self._executables: dict[tuple[Any, ...], Any] = {}
        self._compiling = threading.Lock()

    @property
    def num_compiled(self) -> int:
        return len(self._executables)

    def prepare(self, *args: Any) -> Any:
        """The executable for these argument shapes, compiled now if it is new."""
        key = _signature(args)
        executable = self._executables.get(key)
        if executable is None:
            with self._compiling:
                if key not in self._executables:
                    self._executables[key] = self._jitted.lower(*args).compile()
                executable = self._executables[key]
        return executable

    def __call__(self, *args: Any) -> Any:
        return self.prepare(*args)(*args)
