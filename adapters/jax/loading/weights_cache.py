"""Converted-weights cache: transformer parameters saved once, after conversion, with
orbax-checkpoint, and restored straight onto the devices on later starts.

A restore reads the stored (stacked, cast: bf16 is half of an fp32 checkpoint) arrays
with tensorstore's parallel readers and places them with the target sharding, skipping
safetensors parsing, renaming, transposing and casting. Entries are not compressed:
trained weights barely compress, and decompressing costs restore time. An entry is named by a hash of
everything that decides its contents: the identity (path, size, mtime) of every source
file, each parameter's path, shape and storage dtype (so the dtype policy and the
layer layout), any extra identity the caller adds, and `CACHE_FORMAT`. Anything that
changes gives a new name, so a stale entry is never read; old entries stay on disk
until the folder is cleared.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
from jax.sharding import Sharding, SingleDeviceSharding

from wanjax.adapters.checkpoints.safetensors_file import FileIdentity

CACHE_FORMAT = 1  # bump when the stored layout of a parameter changes meaning
ParamPath = tuple[str | int, ...]

log = logging.getLogger(__name__)


def cache_key(
    files: Sequence[FileIdentity], layout: Mapping[ParamPath, jax.ShapeDtypeStruct], extra: Sequence[str] = ()
) -> str:
    """A hex digest of what decides the converted weights (see the module docstring)."""
    described = {
        "format": CACHE_FORMAT,
        "files": [[f.path, f.size, f.mtime_ns] for f in files],
        "params": sorted([_name(p), list(a.shape), str(a.dtype)] for p, a in layout.items()),
        "extra": list(extra),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


def _name(path: ParamPath) -> str:
    return ".".join(map(str, path))


class ConvertedWeightsCache:
    """Entries `folder/<key>`, each one orbax checkpoint of one transformer's parameters."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()

    def restore(
        self,
        key: str,
        layout: Mapping[ParamPath, jax.ShapeDtypeStruct],
        sharding: Sharding | Mapping[ParamPath, Sharding] | None = None,
    ) -> dict[ParamPath, jax.Array] | None:
        """The entry's arrays placed with `sharding`, one for all or one per parameter path
        (default: the default device), or None when there is no entry or it cannot be read
        (then it is rewritten after conversion)."""
        entry = self.folder / key
        if not entry.is_dir():
            return None
        import orbax.checkpoint as ocp

        sharding = sharding or SingleDeviceSharding(jax.devices()[0])
        of = sharding.__getitem__ if isinstance(sharding, Mapping) else lambda _: sharding
        target = {_name(p): jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=of(p)) for p, a in layout.items()}
        args = ocp.args.PyTreeRestore(item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target))
        try:
            with ocp.PyTreeCheckpointer() as checkpointer:
                restored = checkpointer.restore(entry, args=args)
        except Exception as err:  # a damaged entry costs a conversion, never the run
            log.warning("converted-weights cache entry %s unreadable (%s); converting again", entry, err)
            return None
        return {path: restored[_name(path)] for path in layout}

    def save(self, key: str, arrays: Mapping[ParamPath, jax.Array]) -> None:
        """Writes the entry (atomically: orbax renames a finished temporary folder into place).

        A failure (disk full, a concurrent writer of the same entry) is logged, not raised:
        the weights are already loaded."""
        import orbax.checkpoint as ocp

        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            with ocp.PyTreeCheckpointer(use_compression=False) as checkpointer:
                checkpointer.save(self.folder / key, {_name(p): a for p, a in arrays.items()}, force=True)
        except Exception as err:
            log.warning("could not write converted-weights cache entry %s (%s)", self.folder / key, err)
