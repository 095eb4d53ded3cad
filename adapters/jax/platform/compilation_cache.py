"""JAX's persistent compilation cache: executables written to disk, read back by later processes."""

from __future__ import annotations

from pathlib import Path

import jax


def enable_compilation_cache(folder: Path) -> None:
    """Every executable compiled from now on is looked up in, and written to, `folder`.

    JAX by default writes only executables that took over a second to compile; here every
    one is written (min compile time 0), so a second process with the same config compiles
    nothing at all: the small per-op executables add up too (on CPU, a few seconds).
    Process-global: see `wanjax.application.caches.configure_compilation_cache`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
