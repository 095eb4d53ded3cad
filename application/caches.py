"""Where wanjax keeps what speeds up later starts: compiled executables and converted weights.

Both live under one user cache folder, `$WANJAX_CACHE` (else `$XDG_CACHE_HOME/wanjax`, else
`~/.cache/wanjax`), next to the demo checkpoint; a config value of `auto` means that
folder, a path means itself, and empty / `none` / `off` turns the cache off.
"""

from __future__ import annotations

from pathlib import Path

OFF = ("", "none", "off", "false")


def cache_folder(setting: str | None, name: str) -> Path | None:
    """The folder a `*_cache_dir` setting names: `auto` -> <user cache>/`name`; off -> None."""
    if setting is None or setting.strip().lower() in OFF:
        return None
    if setting == "auto":
        from wanjax.adapters.demo.checkpoint import default_cache_dir

        return default_cache_dir() / name
    return Path(setting).expanduser()


def configure_compilation_cache(setting: str | None) -> Path | None:
    """Turns on JAX's persistent compilation cache in the folder `setting` names; returns it.

    JAX's cache setting is process-global and read when the first executable is compiled
    with a folder set, so it is set in one place, by the owner of the process, before any
    model loads: the CLI at start (an embedding application calls this itself, or leaves
    its own JAX settings alone). Building a container never changes it.
    """
    folder = cache_folder(setting, "xla")
    if folder is not None:
        from wanjax.adapters.jax.platform.compilation_cache import enable_compilation_cache

        enable_compilation_cache(folder)
    return folder
