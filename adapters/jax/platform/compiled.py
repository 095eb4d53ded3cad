"""Ahead-of-time compilation keyed by argument shapes, so compile time is its own phase."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax


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
