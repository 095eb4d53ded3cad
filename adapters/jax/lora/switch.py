"""Per-request LoRAs on a loaded JaxDenoiser: its experts' parameters swapped for a merged copy.

The denoising executables take each expert's parameters as arguments, so a copy of the same
shapes and dtypes runs on them without compiling anything; the base parameters stay on the
device untouched, so a run without LoRAs gets them back bit for bit. Only the merged copy of
the LoRA set in use is kept (one set at a time: runs with the same set share it, a run with
another waits until they end); the files' factors stay cached (`LoraFactorCache`), so a switch
back to an earlier set is a merge on the device, not a read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from flax import nnx

from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.lora.factors import FileIdentity, LoraFactorCache, file_identity
from wanjax.adapters.jax.lora.merge import ParameterMerges, merged_parameters
from wanjax.adapters.jax.transformer.weights import parameter_slots, transformer_weight_shapes
from wanjax.domain.lora import LoraSet


class JaxLoraSwitch:
    """Implements the LoraSwitch port on a JaxDenoiser's experts; the factor cache holds at most
    `cache_bytes` of LoRA factors on the device."""

    def __init__(self, denoiser: JaxDenoiser, *, cache_bytes: int) -> None:
        self._program = denoiser.program
        self._base: tuple[nnx.State, ...] = self._program.params
        architecture = self._program.architecture
        self._slots = {slot.name: slot for slot in parameter_slots(architecture)}
        self.factors = LoraFactorCache(transformer_weight_shapes(architecture), cache_bytes)
        self.merges = ParameterMerges()
        self._active: tuple[LoraSet, tuple[FileIdentity, ...]] = ((),) * len(self._base), ()
        self._runs = 0
        self._changed = threading.Condition()

    @contextmanager
    def applied(self, loras: LoraSet) -> Iterator[None]:
        """The denoiser runs with `loras` (per expert; no LoRAs: the base parameters) until the
        context ends. Runs with the same LoRAs (same files, unchanged on disk, same scales) share the
        merged copy; a run with others waits for them to end, then merges its own."""
        wanted = (tuple(loras), tuple(file_identity(spec.path) for specs in loras for spec in specs))
        with self._changed:
            self._changed.wait_for(lambda: self._runs == 0 or self._active == wanted)
            if self._active != wanted:
                self._switch(wanted)
            self._runs += 1
        try:
            yield
        finally:
            with self._changed:
                self._runs -= 1
                self._changed.notify_all()

    def _switch(self, wanted: tuple[LoraSet, tuple[FileIdentity, ...]]) -> None:
        self._program.params, self._active = self._base, ((),) * len(self._base)  # the old copy freed first
        if not any(wanted[0]):
            return
        params = []
        for base, specs in zip(self._base, wanted[0]):
            loras = [(self.factors.get(spec.path), spec.scale) for spec in specs]
            params.append(merged_parameters(base, self._slots, loras, self.merges) if loras else base)
        self._program.params, self._active = tuple(params), wanted
